"""Soak: a steady agent load for `--minutes` while the server's resources are sampled.

    uv run python bench/bench_soak.py [--minutes 10] [--clients 8] [--interval 10] [--postgres [--workers 2]]

One real `assay serve` process (SQLite by default; `--postgres`: `ASSAY_BENCH_POSTGRES_URL`, else a
throwaway cluster as `bench_complete.py` makes) is driven by `--clients` asyncio clients, each
playing whole task runs over and over, as an agent harness does: create a run (org key), `start`
(a Synthea patient's FHIR dataset), 12 FHIR requests (searches, a create, a read, an update), one
HL7 message to `hl7/outbound`, `complete`; now and then an unauthenticated request and `/healthz`.

Every `--interval` seconds it samples the server's process tree from `/proc`: resident memory
(RSS), threads, open file descriptors and database connections (PostgreSQL: the server's backends
in `pg_stat_activity`; SQLite: descriptors open on the database file, one per pooled connection),
and prints a row with the requests and errors of that interval. At the end a verdict per
resource: a least-squares slope over the samples after the warm-up (the first fifth), and whether
the resource is flat — its projected growth over the measured window below a tolerance (RSS:
the larger of 5% and 16 MB; threads, descriptors, connections: the second half's peak no higher
than the first half's plus 2). Exit 0 when all are flat and no request failed with a 5xx or hung.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _serve import assay_serve
from bench_complete import KEY, postgres

ROOT = Path(__file__).resolve().parents[1]
PATIENT_BUNDLE = next(
    iter(sorted((ROOT / "tests" / "fixtures" / "fhir" / "synthea").glob("*/Clemente_*.json")))
)
REQUEST_TIMEOUT = 60.0
"""A request that takes longer counts as hung."""


@dataclass
class Sample:
    at: float
    rss_mb: float
    threads: int
    fds: int
    connections: int
    requests: int
    errors: int


@dataclass
class Tally:
    requests: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    """Unexpected answers by kind: 5xx statuses, other surprises, timeouts and transport errors."""
    task_runs: int = 0

    @property
    def errors(self) -> int:
        return sum(self.statuses.values())


# -- the server and its resources ------------------------------------------------------------------


@contextmanager
def serve(data_dir: Path, database_url: str | None, workers: int) -> Iterator[tuple[str, int]]:
    """`assay serve` in its own process group; (url, pid)."""
    with assay_serve(
        data_dir, KEY, database_url=database_url, workers=workers, log=data_dir.parent / "serve.log"
    ) as served:
        yield served


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (workers, the listener process)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as status:
        return dict(line.split(":", 1) for line in status.read().splitlines() if ":" in line)


def _sqlite_connections(pids: list[int], database: Path) -> int:
    """Descriptors open on the SQLite file itself: one per open connection."""
    target, count = str(database.resolve()), 0
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        count += 1
                except OSError:
                    continue
        except OSError:
            continue
    return count


def _postgres_connections(url: str, pids: list[int]) -> int:
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    with psycopg.connect(
        host=parsed.host,
        port=parsed.port,
        user=parsed.username,
        dbname=parsed.database,
        password=parsed.password,
    ) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def measure(pid: int, database_url: str | None, data_dir: Path) -> tuple[float, int, int, int]:
    """(RSS MB, threads, open fds, DB connections) of the server's process tree."""
    pids = _tree(pid)
    rss_kb = threads = fds = 0
    for member in pids:
        try:
            status = _status(member)
            rss_kb += int(status["VmRSS"].split()[0])
            threads += int(status["Threads"])
            fds += len(os.listdir(f"/proc/{member}/fd"))
        except (OSError, KeyError, ValueError):
            continue
    if database_url:
        connections = _postgres_connections(database_url, pids)
    else:
        connections = _sqlite_connections(pids, data_dir / "assay.db")
    return rss_kb / 1024, threads, fds, connections


# -- the load ------------------------------------------------------------------------------------


def prepare(url: str) -> str:
    """A benchmark with one task over one Synthea patient (FHIR) and a criterion per surface used."""
    bundle = json.loads(PATIENT_BUNDLE.read_text())
    patient = next(e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Patient")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=300) as api:
        tag = uuid.uuid4().hex[:6]
        dataset = api.post("/datasets", json={"name": f"soak {tag}", "type": "fhir", "data": bundle})
        dataset.raise_for_status()
        benchmark = api.post("/benchmarks", json={"name": f"soak {tag}", "concurrency": 1})
        benchmark.raise_for_status()
        task = api.post(
            "/tasks",
            json={
                "benchmark_id": benchmark.json()["id"],
                "name": "soak",
                "dataset_ids": [dataset.json()["id"]],
            },
        )
        task.raise_for_status()
        for label, assertion in (
            (
                "note written",
                {
                    "assert": "fhir-resource-state",
                    "resource_type": "Observation",
                    "search": {"patient": f"Patient/{patient['id']}", "code": "soak"},
                },
            ),
            (
                "ADT sent",
                {
                    "assert": "hl7-structural",
                    "correlate_by": {"message_type": "ADT^A08"},
                    "fields": [{"path": "PID.5.1", "expected": "SOAK"}],
                },
            ),
        ):
            criterion = {"task_id": task.json()["id"], "label": label, "assertion": assertion}
            api.post("/criteria", json=criterion).raise_for_status()
    return str(benchmark.json()["id"]) + "|" + str(patient["id"]) + "|" + patient["name"][0]["family"]


def _observation(patient_id: str) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "urn:soak", "code": "soak"}], "text": "soak"},
        "subject": {"reference": f"Patient/{patient_id}"},
        "valueString": "soak",
    }


async def _expect(tally: Tally, reply: httpx.Response, *ok: int) -> httpx.Response:
    tally.requests += 1
    if reply.status_code not in ok and not (reply.status_code == 503 and reply.headers.get("retry-after")):
        tally.statuses[f"{reply.request.method} {reply.status_code}"] += 1
    return reply


async def _task_run(client: httpx.AsyncClient, prepared: str, tally: Tally) -> None:
    benchmark_id, patient_id, family = prepared.split("|")
    org = {"Authorization": f"Bearer {KEY}"}
    created = await _expect(
        tally, await client.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id}, headers=org), 201
    )
    if created.status_code != 201:
        return
    body = created.json()
    agent = {"Authorization": f"Bearer {body['bearer_token']}"}
    task_run = body["task_runs"][0]
    started = await _expect(tally, await client.post(task_run["start_url"], headers=agent), 200)
    if started.status_code != 200:
        return
    fhir = f"/v1/task-runs/{task_run['id']}/fhir"
    for _ in range(3):
        await _expect(
            tally, await client.get(f"{fhir}/Patient", params={"family": family}, headers=agent), 200
        )
        await _expect(
            tally,
            await client.get(
                f"{fhir}/Encounter", params={"patient": patient_id, "_count": 10}, headers=agent
            ),
            200,
        )
    made = await _expect(
        tally, await client.post(f"{fhir}/Observation", json=_observation(patient_id), headers=agent), 201
    )
    if made.status_code == 201:
        ident = made.json()["id"]
        await _expect(tally, await client.get(f"{fhir}/Observation/{ident}", headers=agent), 200)
        update = {**_observation(patient_id), "id": ident, "valueString": "soak, updated"}
        await _expect(tally, await client.put(f"{fhir}/Observation/{ident}", json=update, headers=agent), 200)
    await _expect(
        tally,
        await client.get(
            f"{fhir}/Observation", params={"patient": patient_id, "code": "soak"}, headers=agent
        ),
        200,
    )
    facility = started.json()["credentials"]["hl7"]["receiving_facility"]
    message = (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|S-1|P|2.5.1\r"
        "PID|1||MRN1^^^HOSP^MR||SOAK^TEST||19800101|M\r"
    )
    await _expect(
        tally,
        await client.post(
            f"/v1/task-runs/{task_run['id']}/hl7/outbound",
            content=message,
            headers={**agent, "Content-Type": "x-application/hl7-v2+er7"},
        ),
        200,
    )
    await _expect(tally, await client.get("/benchmarks"), 401)
    await _expect(tally, await client.get("/healthz"), 200)
    completed = await _expect(tally, await client.post(task_run["complete_url"], headers=agent), 200)
    if completed.status_code == 200:
        tally.task_runs += 1
        if completed.json().get("verdict") != "pass":
            tally.statuses["complete: not pass"] += 1


async def _client_loop(url: str, prepared: str, until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT) as client:
        while time.monotonic() < until:
            try:
                await _task_run(client, prepared, tally)
            except httpx.TimeoutException:
                tally.statuses["hung (timeout)"] += 1
            except httpx.TransportError as exc:
                tally.statuses[type(exc).__name__] += 1


async def soak(
    url: str, pid: int, prepared: str, args: argparse.Namespace, database_url: str | None, data_dir: Path
) -> tuple[list[Sample], Tally]:
    tally = Tally()
    samples: list[Sample] = []
    began = time.monotonic()
    until = began + args.minutes * 60
    clients = [asyncio.create_task(_client_loop(url, prepared, until, tally)) for _ in range(args.clients)]
    last_requests = last_errors = 0
    print(
        f"{'t (s)':>6} {'RSS MB':>8} {'threads':>8} {'fds':>6} {'db conns':>9} {'requests':>9} {'errors':>7}"
    )
    while True:
        rss, threads, fds, connections = await asyncio.to_thread(measure, pid, database_url, data_dir)
        sample = Sample(
            time.monotonic() - began, rss, threads, fds, connections,
            tally.requests - last_requests, tally.errors - last_errors,
        )  # fmt: skip
        last_requests, last_errors = tally.requests, tally.errors
        samples.append(sample)
        print(
            f"{sample.at:6.0f} {sample.rss_mb:8.1f} {sample.threads:8d} {sample.fds:6d} "
            f"{sample.connections:9d} {sample.requests:9d} {sample.errors:7d}",
            flush=True,
        )
        if time.monotonic() >= until:
            break
        await asyncio.sleep(min(args.interval, max(0.0, until - time.monotonic())))
    await asyncio.gather(*clients)
    return samples, tally


# -- the verdict ---------------------------------------------------------------------------------


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope (units per second)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def verdicts(samples: list[Sample]) -> list[tuple[str, str, bool]]:
    """(resource, what was found, flat?) for each sampled resource, after the warm-up."""
    measured = samples[max(1, len(samples) // 5) :]
    if len(measured) < 4:
        return [("samples", f"only {len(measured)} after the warm-up: run longer", False)]
    window = measured[-1].at - measured[0].at
    half = len(measured) // 2
    found = []
    rss = [(s.at, s.rss_mb) for s in measured]
    per_second = slope(rss)
    mean = sum(v for _, v in rss) / len(rss)
    growth = per_second * window
    tolerance = max(0.05 * mean, 16.0)
    found.append(
        (
            "RSS",
            f"{per_second * 60:+.2f} MB/min (projected {growth:+.1f} MB over {window / 60:.1f} min, "
            f"tolerance {tolerance:.0f} MB; {measured[0].rss_mb:.0f} → {measured[-1].rss_mb:.0f} MB)",
            growth < tolerance,
        )
    )
    for name in ("threads", "fds", "connections"):
        values = [(s.at, float(getattr(s, name))) for s in measured]
        first = max(v for _, v in values[:half])
        second = max(v for _, v in values[half:])
        found.append(
            (
                name,
                f"{slope(values) * 60:+.2f}/min; peak {first:.0f} in the first half, {second:.0f} in the second",
                second <= first + 2,
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load runs (default 10)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent agent clients (default 8)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of the SQLite default")
    parser.add_argument("--workers", type=int, default=1, help="API worker processes (default 1)")
    args = parser.parse_args()

    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"soak: {args.minutes:g} min, {args.clients} clients, {backend}, {args.workers} worker(s)")
    print("load before:", os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="assay-soak-") as tmp:
        data_dir = Path(tmp) / "data"
        database = postgres() if args.postgres else _no_database()
        with database as database_url, serve(data_dir, database_url, args.workers) as (url, pid):
            prepared = prepare(url)
            samples, tally = asyncio.run(soak(url, pid, prepared, args, database_url, data_dir))
            after = httpx.get(f"{url}/healthz", timeout=30).status_code
    print("load after:", os.getloadavg())
    print(
        f"\n{tally.requests} requests, {tally.task_runs} task runs completed, unexpected answers: {tally.errors}"
    )
    if tally.statuses:
        print("  ", dict(tally.statuses))
    print(f"/healthz after the soak: {after}")
    flat = True
    for name, found, ok in verdicts(samples):
        flat = flat and ok
        print(f"{name:12} {'flat' if ok else 'GROWING'}  {found}")
    passed = flat and tally.errors == 0 and after == 200
    print(f"verdict: {'PASS' if passed else 'FAIL'} (flat resources, every request answered, no 5xx)")
    sys.exit(0 if passed else 1)


@contextmanager
def _no_database() -> Iterator[str | None]:
    yield None


if __name__ == "__main__":
    main()
