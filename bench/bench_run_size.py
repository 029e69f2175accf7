"""Run-size benchmark: `start` and `complete` cost the same in a benchmark run of 7, 350 or 5,000
task runs (they lock and read their own task run, not its siblings).

    uv run python bench/bench_run_size.py [--sizes 7,350,5000] [--samples 40] [--postgres] [--workers 1]

For each size, one benchmark run of that many task runs (tasks × trials of a draft benchmark
whose tasks each have one voice criterion; runs of 7 are created as many times as the samples
need), then one agent starts and completes `--samples` of its task runs one after the other,
after `--warmup` untimed pairs. Prints the p50 and p99 of `start` and `complete` per size and
their ratio to the smallest size. Target (2-core machine): p50 at 350 and at 5,000 within 1.25×
of 7. `--postgres`: `assay serve` on PostgreSQL (`ASSAY_BENCH_POSTGRES_URL`, else a throwaway
cluster, as `bench_complete.py` does) instead of the embedded SQLite.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from _serve import assay_serve
from bench_complete import KEY, postgres

CRITERION = {
    "label": "no SSN asked",
    "assertion": {
        "assert": "voice-transcript",
        "speaker": "agent",
        "not_contains": ["social security number"],
    },
}
MAX_TRIALS = 50


def make_benchmark(api: httpx.Client, tasks: int) -> str:
    body = {"name": f"run size {uuid.uuid4().hex[:6]}", "concurrency": 1}
    benchmark = api.post("/benchmarks", json=body).raise_for_status().json()
    for i in range(tasks):
        task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": f"task {i}"})
        api.post(
            "/criteria", json={"task_id": task.raise_for_status().json()["id"], **CRITERION}
        ).raise_for_status()
    return str(benchmark["id"])


def shape(size: int) -> tuple[int, int]:
    """(tasks, trials) with tasks × trials == size, trials at most the API's 50."""
    trials = next(t for t in range(min(MAX_TRIALS, size), 0, -1) if size % t == 0 and size // t <= 5000)
    return size // trials, trials


def task_runs(api: httpx.Client, size: int, needed: int) -> Iterator[tuple[str, str]]:
    """(run token, task run id), `needed` of them, from runs of `size` task runs."""
    tasks, trials = shape(size)
    benchmark_id = make_benchmark(api, tasks)
    for _ in range(math.ceil(needed / size)):
        created = api.post(
            "/v1/benchmark-runs", json={"benchmark_id": benchmark_id, "trials": trials}, timeout=600
        )
        body = created.raise_for_status().json()
        assert len(body["task_runs"]) == size, len(body["task_runs"])
        for task_run in body["task_runs"][:needed]:
            yield body["bearer_token"], task_run["id"]
        needed -= size


def measure(url: str, size: int, samples: int, warmup: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"start": [], "complete": []}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as api:
        pairs = list(task_runs(api, size, warmup + samples))
    with httpx.Client(base_url=url, timeout=60) as agent:
        for i, (token, task_run_id) in enumerate(pairs):
            headers = {"Authorization": f"Bearer {token}"}
            for verb in ("start", "complete"):
                begin = time.perf_counter()
                response = agent.post(f"/v1/task-runs/{task_run_id}/{verb}", headers=headers)
                elapsed = time.perf_counter() - begin
                assert response.status_code == 200, response.text
                if i >= warmup:
                    timings[verb].append(elapsed * 1000)
    return timings


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="7,350,5000", help="task runs per benchmark run, comma-separated")
    parser.add_argument("--samples", type=int, default=40, help="timed start/complete pairs per size")
    parser.add_argument("--warmup", type=int, default=5, help="untimed pairs first, per size")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--workers", type=int, default=1, help="assay serve --workers")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}; {backend}, {args.workers} worker(s); one agent, "
        f"{args.samples} start/complete pairs per size"
    )
    results: dict[int, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as folder, ExitStack() as stack:
        database_url = stack.enter_context(postgres()) if args.postgres else None
        env = {"ASSAY_SWEEP_INTERVAL": "5"}
        url, _pid = stack.enter_context(
            assay_serve(Path(folder) / "data", KEY, database_url=database_url, workers=args.workers, env=env)
        )
        for size in sizes:
            results[size] = measure(url, size, args.samples, args.warmup)
    base = results[sizes[0]]
    print(
        f"{'task runs':>10} {'start p50':>10} {'p99':>8} {'ratio':>6} {'complete p50':>13} {'p99':>8} {'ratio':>6}"
    )
    for size, timings in results.items():
        row: list[Any] = [size]
        for verb in ("start", "complete"):
            p50 = statistics.median(timings[verb])
            row += [p50, _p(timings[verb], 0.99), p50 / statistics.median(base[verb])]
        print("{:>10} {:>10.1f} {:>8.1f} {:>6.2f} {:>13.1f} {:>8.1f} {:>6.2f}".format(*row))
    print("target: every ratio <= 1.25 (start and complete p50 against the smallest run)")


if __name__ == "__main__":
    main()
