"""How many SQL statements a warm `start` and a `complete` run: each is a round trip to PostgreSQL,
and under tens of agents on a busy machine every round trip is also a wait to be scheduled, so
their number is the lever for the start and complete latency at scale (docs/performance.md).

The counts are pinned exactly, per backend: a change that adds a statement to either verb fails
here and has to say why (and update the number); one that removes some updates it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from assay.client import Assay
from assay.clients.demo.runner import PACKAGE
from assay.clients.packages import push, read_package
from tests.listening import listening, on_request_thread
from tests.service.builders import ok
from tests.service.conftest import Server

START = {"sqlite": 12, "postgres": 10}
"""A warm start (the run's token, the version and the FHIR layer its tasks seed already known to
this worker, so nothing is read before the transaction) of a task of the bundled benchmark, whose
environment seeds every surface: the task run locked and read with its run, the playground and its
sandboxes written, each surface's seed (the FHIR store, the payer, the portal's store and rows, the
HL7 facility), the seeded credentials, and the slot taken with the task run's row. On PostgreSQL
the writes are pipelined (two round trips for the nine after the lock) and the slot and the task
run's row are one statement; SQLite counts its `BEGIN` too (was 33 on PostgreSQL, 36 on SQLite)."""

COMPLETE = {"sqlite": 10, "postgres": 8}
"""Its `complete` with nothing done: the task run locked and read with its run, the sandboxes
locked (the write gate), every surface's capture value in one read (the voice line's open calls
with them), the FHIR store's row (this worker never served it), then the criterion runs, the
teardown and, on PostgreSQL in the same statement, the task run's end and the run's count (was 12
on PostgreSQL, 13 on SQLite)."""

FINAL_COMPLETE = {"sqlite": 12, "postgres": 10}
"""The run's last `complete`, which also scores the run: its task runs' scores read, and the run's
row written (its phase and status come back with the count, `count_ended`)."""


@contextmanager
def _statements(server: Server) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if on_request_thread():
            seen.append(" ".join(statement.split())[:120])

    with listening(server.database.engine, "before_cursor_execute", count):
        yield seen


def _run(server: Server) -> tuple[str, list[str]]:
    """A run of the bundled benchmark in an org of its own: (run token, task run ids)."""
    key = server.new_org_key()
    package = read_package(PACKAGE)
    package = replace(package, benchmark={**package.benchmark, "concurrency": 4})
    with Assay(api_key=key, base_url=server.url, timeout=120) as client:
        report = push(client, package)
        version = client.benchmarks.publish(report.benchmark_id, force=True)
    with server.client(key) as api:
        body = {"benchmark": f"{version.slug}@{version.version}", "agent": {"name": "counts"}}
        run = ok(api.post("/v1/benchmark-runs", json=body), 201)
    return run["bearer_token"], [task_run["id"] for task_run in run["task_runs"]]


def test_start_and_complete_run_a_pinned_number_of_statements(server: Server) -> None:
    token, ids = _run(server)
    with server.client(token) as agent:
        ok(agent.post(f"/v1/task-runs/{ids[0]}/start"))  # the token, the layer, the version: now known
        with _statements(server) as started:
            body = ok(agent.post(f"/v1/task-runs/{ids[1]}/start"))
        assert body["phase"] == "started"
        with _statements(server) as completed:
            done = ok(agent.post(f"/v1/task-runs/{ids[1]}/complete"))
        assert done["phase"] == "completed"
        listing = "\n".join(started) + "\n--\n" + "\n".join(completed)
        assert (len(started), len(completed)) == (START[server.backend], COMPLETE[server.backend]), listing
        for task_run_id in [ids[0], *ids[2:-1]]:
            if task_run_id != ids[0]:
                ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
            ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
        ok(agent.post(f"/v1/task-runs/{ids[-1]}/start"))
        with _statements(server) as last:
            ok(agent.post(f"/v1/task-runs/{ids[-1]}/complete"))
        run = ok(agent.get(f"/v1/task-runs/{ids[-1]}"))
        assert len(last) == FINAL_COMPLETE[server.backend], "\n".join(last)
        assert run["phase"] == "completed"
