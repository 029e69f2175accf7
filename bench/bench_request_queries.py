"""SQL statements and database round trips per agent request, by kind: what load does not change.

    uv run python bench/bench_request_queries.py [--postgres]

An in-process `assay serve` (one worker, the server's own engine instrumented with SQLAlchemy's
`before_cursor_execute` and `commit` events) and the bundled "front office" benchmark. One agent
works task run A while another agent works task run B of the same benchmark run; for each kind
of A's request — `start`, a FHIR read, a FHIR search, a FHIR create, an X12 270, `complete` —
it counts what A's request ran when it comes:

- **warm**: right after the same request by A (nothing changed since);
- **after B wrote**: right after B's FHIR create, as with many agents at once, where some other
  agent has almost always written since this one's last request.

Counted per request: statements (each a round trip, but for pipelined ones on PostgreSQL),
commits, and on PostgreSQL the change epoch's reads and moves (each one round trip). The
sweeper's and the event log writer's statements are left out (they run on their own threads,
not on the request's path). A request's cost under load is these round trips times the per-round
trip cost, so these counts are the lever for the closed-loop latency with C agents.

Then `--task-runs` whole task runs of `bench_task_runs.py` (start, 20 operations over every
protocol, complete) by `--agents` agents at once, and the same counts per task run: on the
request path, and everything (the event log's writer and the sweeper included).
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from bench_complete import KEY, postgres
from bench_task_runs import Timings, drive
from bench_task_runs import prepare as prepare_task_runs
from sqlalchemy import event

from assay.client import Assay
from assay.clients.demo.agent import ELIGIBILITY_270
from assay.clients.demo.runner import PACKAGE
from assay.clients.packages import push, read_package
from assay.service.app import create_app
from assay.service.settings import Settings
from assay.store import epoch_postgres as epoch_module

FHIR = {"Content-Type": "application/fhir+json"}
APPOINTMENT = {
    "resourceType": "Appointment",
    "status": "booked",
    "start": "2026-12-03T09:00:00Z",
    "end": "2026-12-03T09:30:00Z",
    "participant": [{"actor": {"reference": "Patient/john-smith"}, "status": "accepted"}],
}
QUIET_THREADS = ("assay-sweeper", "assay-event-log")


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the main thread's signals are the script's
        pass


@contextmanager
def serving(settings: Settings) -> Iterator[tuple[str, Any]]:
    app = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


class Counts:
    """What the instrumented engine and the epoch did, on request threads, while counting."""

    def __init__(self, engine: Any):
        self.on = False
        self.verbose = False
        self.seen: Counter[str] = Counter()
        self.engine = engine
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)
        self._patch_epoch()

    def _counting(self) -> bool:
        return self.on and threading.current_thread().name not in QUIET_THREADS

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if self.on:
            self.seen["all statements"] += 1
        if self._counting():
            self.seen["statements"] += 1
            if self.verbose:
                print("   ", " ".join(statement.split())[:160])

    def _commit(self, *_args: Any) -> None:
        if self.on:
            self.seen["all commits"] += 1
        if self._counting():
            self.seen["commits"] += 1

    def _patch_epoch(self) -> None:
        connection = getattr(epoch_module, "_EpochConnection", None)
        if connection is not None:
            read = connection.read

            async def counted_read(this: Any, *args: Any) -> Any:
                if self.on:
                    self.seen["epoch reads"] += 1
                return await read(this, *args)

            connection.read = counted_read
        nextval = epoch_module._nextval

        def counted_nextval(*args: Any) -> bool:
            if self._counting():
                self.seen["epoch moves"] += 1
            return bool(nextval(*args))

        epoch_module._nextval = counted_nextval

    @contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        self.seen = Counter()
        self.on = True
        try:
            yield self.seen
        finally:
            time.sleep(0.05)  # a bump after the response was sent (checkin) is the request's too
            self.on = False


def prepare(url: str) -> tuple[str, list[str]]:
    """(run token, task run ids) of one benchmark run of the bundled benchmark, trials 2."""
    package = read_package(PACKAGE)
    package = replace(package, benchmark={**package.benchmark, "concurrency": 8})
    with Assay(api_key=KEY, base_url=url, timeout=600) as client:
        report = push(client, package)
        version = client.benchmarks.publish(report.benchmark_id, force=True)
    body = {"benchmark": f"{version.slug}@{version.version}", "trials": 2, "agent": {"name": "bench"}}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as api:
        run = api.post("/v1/benchmark-runs", json=body).raise_for_status().json()
    return run["bearer_token"], [task_run["id"] for task_run in run["task_runs"]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--statements", action="store_true", help="print each statement counted")
    parser.add_argument("--task-runs", type=int, default=32, help="whole task runs counted")
    parser.add_argument("--agents", type=int, default=8, help="agents working them at once")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as folder, ExitStack() as stack:
        database_url = stack.enter_context(postgres()) if args.postgres else None
        settings = Settings(
            data_dir=Path(folder),
            database_url=database_url,
            bootstrap_api_key=KEY,
            sweep_interval=60,
        ).with_free_ports()
        url, app = stack.enter_context(serving(settings))
        token, ids = prepare(url)
        counts = Counts(app.state.database.engine)
        counts.verbose = args.statements
        headers = {"Authorization": f"Bearer {token}"}
        a = stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=120))
        b = stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=120))
        ends: dict[str, dict[str, str]] = {}
        for client, task_run_id in ((b, ids[1]), (a, ids[0])):
            started = client.post(f"/v1/task-runs/{task_run_id}/start").raise_for_status().json()
            ends[task_run_id] = started["endpoints"]
        mine, theirs = ends[ids[0]], ends[ids[1]]

        def other_agent_writes() -> None:
            b.post(theirs["fhir"] + "/Appointment", json=APPOINTMENT, headers=FHIR).raise_for_status()

        x12 = {"content": ELIGIBILITY_270, "headers": {"Content-Type": "application/edi-x12"}}
        kinds: list[tuple[str, Callable[[], httpx.Response]]] = [
            ("FHIR read", lambda: a.get(mine["fhir"] + "/Patient/john-smith")),
            ("FHIR search", lambda: a.get(mine["fhir"] + "/Patient", params={"name": "Smith"})),
            ("FHIR create", lambda: a.post(mine["fhir"] + "/Appointment", json=APPOINTMENT, headers=FHIR)),
            ("X12 270", lambda: a.post(mine["x12"] + "/270", **x12)),
        ]
        rows: list[tuple[str, str, Counter[str]]] = []
        for name, call in kinds:
            call().raise_for_status()
            with counts.counting() as warm:
                call().raise_for_status()
            rows.append((name, "warm", warm))
            other_agent_writes()
            with counts.counting() as cold:
                call().raise_for_status()
            rows.append((name, "after B wrote", cold))
        # start and complete: task runs 3 and 4 (A's own two are in use), once each.
        for task_run_id in ids[2:3]:
            other_agent_writes()
            with counts.counting() as seen:
                a.post(f"/v1/task-runs/{task_run_id}/start").raise_for_status()
            rows.append(("start", "after B wrote", seen))
            other_agent_writes()
            with counts.counting() as seen:
                a.post(f"/v1/task-runs/{task_run_id}/complete").raise_for_status()
            rows.append(("complete", "after B wrote", seen))
        todo = prepare_task_runs(url, args.task_runs, args.agents)
        with counts.counting() as whole:
            drive(url, todo, args.agents, Timings(), timed=False)
        done = max(1, args.task_runs)
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(f"{backend}: per request of agent A (one worker, in process)")
    columns = ("statements", "commits", "epoch reads", "epoch moves")
    print(f"{'request':14} {'when':14} " + " ".join(f"{c:>12}" for c in columns))
    for name, when, seen in rows:
        print(f"{name:14} {when:14} " + " ".join(f"{seen[c]:12d}" for c in columns))
    print(f"per whole task run ({args.task_runs} by {args.agents} agents at once):")
    for what in ("statements", "commits", "epoch reads", "epoch moves", "all statements", "all commits"):
        print(f"  {what:16} {whole[what] / done:8.1f}")


if __name__ == "__main__":
    main()
