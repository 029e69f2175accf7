"""Micro-benchmark: the sandbox event log's writer on PostgreSQL: statements, COPY, lz4.

    ASSAY_BENCH_POSTGRES_URL=postgresql+psycopg://… uv run python bench/bench_event_log.py [--events N]

Writes `--events` events (default 2,000) through `_EventLog._write`, the writer thread's own path,
in batches of `--batches` sizes, into 16 sandboxes round robin (16 agents). Each event is a FHIR
search answer as the server renders it (a `searchset` Bundle of Synthea resources, ~5.6 KB of
JSON, passed through as `JsonText`) for a GET. Modes (`MODES`): `before`, the code before the event
log's COPY writer (each sandbox locked and its last event read by a statement each, then executemany of
the INSERT); `lookups`, a batch's sandboxes locked and read by two statements, then the INSERT;
`after`, two statements then `COPY` — each with the bodies' TOAST compression pglz or lz4 (set on
the columns before each run). `sandbox_events` is emptied before each run.

Reports per mode the median of `--repeat` runs of: client CPU (`time.thread_time` of the
writing thread), wall, and the PostgreSQL backends' CPU (utime+stime from `/proc/<pid>/stat` of
every backend connected to the database: the server must run on this machine and be readable).
Needs a scratch database whose user may set `session_replication_role` (the sandbox rows are made
without their playgrounds): ASSAY_BENCH_POSTGRES_URL, or a throwaway cluster as bench_complete.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import orjson
from bench_complete import postgres
from sqlalchemy import Engine, text

from assay.sandboxes import events
from assay.store.database import Database

SYNTHEA = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fhir" / "synthea"
SANDBOXES = 16
TICK = os.sysconf("SC_CLK_TCK")
MODES = {
    "before": "two statements a sandbox, then executemany of the INSERT",
    "lookups": "two statements a batch (`_last_events`), then the INSERT",
    "after": "two statements a batch, then COPY",
}


def answers(count: int, size: int = 4100) -> list[bytes]:
    """`count` searchset Bundles of at least `size` bytes (mean ~5.6 KB), of different Synthea resources."""
    resources = [
        entry["resource"]
        for path in sorted(SYNTHEA.glob("*/*.json"))
        for entry in json.loads(path.read_text())["entry"]
    ]
    out: list[bytes] = []
    at = 0
    while len(out) < count:
        kind = resources[at % len(resources)]["resourceType"]
        entries: list[dict[str, Any]] = []
        body = b""
        while len(body) < size:
            resource = resources[at % len(resources)]
            at += 1
            entries.append(
                {
                    "fullUrl": f"http://assay.local/fhir/{resource['resourceType']}/{resource['id']}",
                    "resource": resource,
                    "search": {"mode": "match"},
                }
            )
            url = f"http://assay.local/fhir/{kind}?_count=20"
            body = orjson.dumps(
                {"resourceType": "Bundle", "type": "searchset", "total": len(entries),
                 "link": [{"relation": "self", "url": url}], "entry": entries}
            )  # fmt: skip
        out.append(body)
    return out


def setup(engine: Engine) -> list[str]:
    ids = [f"sbx_bench{n:02d}" for n in range(SANDBOXES)]
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL session_replication_role = replica"))  # no playground rows
        conn.execute(
            text(
                "INSERT INTO organizations (id, name, is_default, created_at) "
                "VALUES ('org_bench', 'bench', false, now()) ON CONFLICT DO NOTHING"
            )
        )
        for ident in ids:
            conn.execute(
                text(
                    "INSERT INTO sandboxes (id, org_id, playground_id, type, status, created_at) "
                    "VALUES (:id, 'org_bench', 'pgd_bench', 'fhir', 'ready', now()) ON CONFLICT DO NOTHING"
                ),
                {"id": ident},
            )
    return ids


def backend_cpu(engine: Engine) -> float:
    """CPU seconds (user+sys) of every backend connected to this database, from /proc."""
    with engine.connect() as conn:
        pids = conn.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        ).scalars()
        total = 0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def run(engine: Engine, sandboxes: list[str], bodies: list[bytes], batch: int, mode: str) -> dict[str, float]:
    log = events._EventLog(engine)
    queued = [
        events._new("org_bench", sandboxes[n % SANDBOXES], "fhir_request", "GET",
                    f"/v1/task-runs/trn_x/fhir/Patient?family=n{n}", 200, b"", body, True)
        for n, body in enumerate(bodies)
    ]  # fmt: skip
    real = events._copies, events._last_events
    if mode == "before":  # the code before: two statements a sandbox, executemany of the INSERT
        events._last_events = events._last_events_each
    if mode != "after":
        events._copies = lambda _dialect, _rows: False  # type: ignore[assignment]
    try:
        cpu0, wall0, pg0 = time.thread_time(), time.perf_counter(), backend_cpu(engine)
        for start in range(0, len(queued), batch):
            log._write(queued[start : start + batch])
        cpu, wall, pg = time.thread_time() - cpu0, time.perf_counter() - wall0, backend_cpu(engine) - pg0
    finally:
        events._copies, events._last_events = real  # type: ignore[method-assign]
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM sandbox_events")).scalar()
    assert stored == len(bodies), stored
    return {"client_cpu_s": cpu, "wall_s": wall, "pg_cpu_s": pg}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--batches", default="8,64,187", help="batch sizes (187 ≈ the writer's 1 MiB)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bodies = answers(args.events)
    print(
        f"{len(bodies)} answers, mean {statistics.mean(map(len, bodies)):.0f} bytes; load {os.getloadavg()}"
    )
    with postgres() as url:
        database = Database(url)
        database.migrate()
        engine = database.engine
        sandboxes = setup(engine)
        for batch in (int(b) for b in args.batches.split(",")):
            for compression in ("pglz", "lz4"):
                with engine.begin() as conn:
                    for column in ("request", "response"):
                        conn.execute(
                            text(
                                f"ALTER TABLE sandbox_events ALTER COLUMN {column} SET COMPRESSION {compression}"
                            )
                        )
                for mode in MODES:
                    results = []
                    for _ in range(args.repeat):
                        with engine.begin() as conn:
                            conn.execute(text("TRUNCATE sandbox_events"))
                        results.append(run(engine, sandboxes, bodies, batch, mode))
                    medians = {key: statistics.median(r[key] for r in results) for key in results[0]}
                    print(
                        f"batch {batch:4d} {compression:4s} {mode:8s}: "
                        + ", ".join(f"{key} {value:.3f}" for key, value in medians.items())
                        + f"  (min client {min(r['client_cpu_s'] for r in results):.3f}, "
                        f"min pg {min(r['pg_cpu_s'] for r in results):.3f})",
                        flush=True,
                    )
        with engine.begin() as conn:
            conn.execute(text("TRUNCATE sandbox_events"))
        database.dispose()


if __name__ == "__main__":
    main()
