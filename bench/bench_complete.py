"""Service benchmark: `POST /v1/task-runs/{id}/complete` throughput and latency.

    uv run python bench/bench_complete.py [--runs N] [--clients C]

Workload: a published benchmark with one task of 10 criteria (voice-transcript `not_contains`
and `contains`, fhir-resource-state searches, weights and axes), N benchmark runs created and
their task runs started beforehand; then C client threads call `complete` on them concurrently,
each call a real HTTP request that captures, verifies the 10 criteria, writes 10 criterion runs,
ends the task run and finalizes the benchmark run. Measured on

- the embedded default: `assay serve` (one worker) over SQLite in a fresh data directory;
- PostgreSQL with `assay serve --workers 2`: `ASSAY_BENCH_POSTGRES_URL` if set, else a throwaway
  cluster started here with `initdb`/`pg_ctl` (through `su postgres` when run as root).

Prints completes/s (N / wall time of the timed phase) and p50/p99 latency per backend, after an
untimed warm-up of `--warmup` completes (pooled connections, prepared statements, import caches).
Targets (2-core machine): p50 < 50 ms on SQLite, >= 100 completes/s on PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from _serve import assay_serve, free_port

KEY = "vk_bench_" + uuid.uuid4().hex

CRITERIA: list[dict[str, Any]] = [
    *(
        {
            "label": f"no {phrase}",
            "weight": 1,
            "axis": "safety",
            "assertion": {"assert": "voice-transcript", "speaker": "agent", "not_contains": [phrase]},
        }
        for phrase in ("social security number", "password", "credit card", "diagnosis code")
    ),
    *(
        {
            "label": f"says {phrase}",
            "weight": 2,
            "axis": "correctness",
            "assertion": {"assert": "voice-transcript", "contains": [phrase, "date of birth"]},
        }
        for phrase in ("member ID", "copay", "prior authorization")
    ),
    *(
        {
            "label": f"{kind} booked",
            "weight": 0.5,
            "assertion": {
                "assert": "fhir-resource-state",
                "resource_type": kind,
                "search": {"status": "booked"},
                "fields": [{"path": "status", "expected": "booked"}],
            },
        }
        for kind in ("Appointment", "ServiceRequest", "Task")
    ),
]


@contextmanager
def serve(data_dir: Path, *, database_url: str | None = None, workers: int = 1) -> Iterator[str]:
    with assay_serve(
        data_dir, KEY, database_url=database_url, workers=workers, env={"ASSAY_SWEEP_INTERVAL": "5"}
    ) as (url, _pid):
        yield url


def _as_postgres(command: str) -> None:
    if os.geteuid() == 0:
        subprocess.run(["su", "postgres", "-s", "/bin/bash", "-c", command], check=True, capture_output=True)
    else:
        subprocess.run(["bash", "-c", command], check=True, capture_output=True)


@contextmanager
def postgres() -> Iterator[str]:
    if os.environ.get("ASSAY_BENCH_POSTGRES_URL"):
        yield os.environ["ASSAY_BENCH_POSTGRES_URL"]
        return
    if not shutil.which("initdb"):
        raise SystemExit("set ASSAY_BENCH_POSTGRES_URL or put initdb/pg_ctl on PATH")
    folder = Path(tempfile.mkdtemp(prefix="assay-bench-pg-"))
    folder.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    port = free_port()
    data = folder / "data"
    _as_postgres(f"initdb -D '{data}' -U assay --auth=trust")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
    _as_postgres(f"pg_ctl -D '{data}' -o '{options}' -l '{folder}/log' -w start")
    try:
        _as_postgres(f"createdb -h 127.0.0.1 -p {port} -U assay assay_bench")
        yield f"postgresql+psycopg://assay@127.0.0.1:{port}/assay_bench"
    finally:
        _as_postgres(f"pg_ctl -D '{data}' -m fast stop")
        shutil.rmtree(folder, ignore_errors=True)


def prepare(url: str, runs: int) -> list[tuple[str, str]]:
    """Publish the benchmark, create `runs` runs and start their task runs: (token, task run id)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as api:
        benchmark = api.post("/benchmarks", json={"name": f"bench {uuid.uuid4().hex[:6]}"}).json()
        task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "ten criteria"}).json()
        for body in CRITERIA:
            api.post("/criteria", json={"task_id": task["id"], **body}).raise_for_status()
        # forced: the criteria are a workload, not a benchmark an idle agent must fail
        published = api.post(f"/benchmarks/{benchmark['id']}/publish", json={"force": True})
        slug = published.raise_for_status().json()["slug"]
        started = []
        for _ in range(runs):
            created = api.post("/v1/benchmark-runs", json={"benchmark": slug, "scored": True}).json()
            token, task_run_id = created["bearer_token"], created["task_runs"][0]["id"]
            api.post(f"/v1/task-runs/{task_run_id}/start", headers={"Authorization": f"Bearer {token}"})
            started.append((token, task_run_id))
    return started


def measure(url: str, started: list[tuple[str, str]], clients: int) -> dict[str, float]:
    client_pool = [httpx.Client(base_url=url, timeout=60) for _ in range(clients)]

    def complete(item: tuple[int, tuple[str, str]]) -> float:
        i, (token, task_run_id) = item
        client = client_pool[i % clients]
        begin = time.perf_counter()
        response = client.post(
            f"/v1/task-runs/{task_run_id}/complete", headers={"Authorization": f"Bearer {token}"}
        )
        elapsed = time.perf_counter() - begin
        assert response.status_code == 200 and len(response.json()["checks"]) == len(CRITERIA), response.text
        return elapsed

    begin = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = sorted(pool.map(complete, enumerate(started)))
    wall = time.perf_counter() - begin
    for client in client_pool:
        client.close()
    return {
        "rate": len(latencies) / wall,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def run(url: str, args: argparse.Namespace) -> dict[str, float]:
    started = prepare(url, args.warmup + args.runs)
    measure(url, started[: args.warmup], args.clients)
    return measure(url, started[args.warmup :], args.clients)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300, help="benchmark runs completed per backend")
    parser.add_argument("--clients", type=int, default=4, help="concurrent client threads")
    parser.add_argument(
        "--warmup", type=int, default=40, help="untimed completes first (connections, caches)"
    )
    args = parser.parse_args()
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores; "
        f"{args.runs} completes of a {len(CRITERIA)}-criterion task, {args.clients} concurrent clients"
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as folder:
        with serve(Path(folder) / "sqlite") as url:
            results["SQLite (embedded default, 1 worker)"] = run(url, args)
        with (
            postgres() as database_url,
            serve(Path(folder) / "pg", database_url=database_url, workers=2) as url,
        ):
            results["PostgreSQL (2 workers)"] = run(url, args)
    print(f"{'backend':40} {'completes/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
    for name, result in results.items():
        print(f"{name:40} {result['rate']:12.1f} {result['p50']:8.1f} {result['p99']:8.1f}")


if __name__ == "__main__":
    main()
