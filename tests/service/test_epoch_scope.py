"""The change epoch is scoped per task run (`store/epoch.py`): one agent's write leaves every other
agent's cached task-run rows and FHIR index current — its next warm read takes no SQL, in this
worker or another on the same database — while a write on the agent's own task run (through any
worker) is seen by its very next read. Both backends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import event

from assay.store.epoch import slot_of

from .builders import make_benchmark, ok, start_run
from .conftest import Server, serving


@contextmanager
def _statements(*servers: Server) -> Iterator[list[str]]:
    """Every statement the servers' engines run meanwhile for requests: not the sweeper's, nor
    the event log writer's (it appends each request's event a moment later)."""
    seen: list[str] = []

    def noted(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.current_thread().name not in ("assay-sweeper", "assay-event-log"):
            seen.append(statement)

    engines = [server.database.engine for server in servers]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", noted)
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", noted)


def _two_started(api: httpx.Client, server: Server) -> list[tuple[Any, str]]:
    """Two started task runs of two benchmark runs whose epoch slots differ (a shared slot is a
    needless reload, which this test would take for a failure): (run, FHIR base path) each."""
    found: list[tuple[Any, str]] = []
    slots: set[int] = set()
    while len(found) < 2:
        run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
        task_run_id = run.task_runs[0]["id"]
        keys = {slot_of(task_run_id), slot_of(run.id)}
        if keys & slots:
            continue
        slots |= keys
        with server.client(run.token) as agent:
            ok(agent.post(run.task_runs[0]["start_url"]))
        found.append((run, f"/v1/task-runs/{task_run_id}/fhir"))
    return found


def _patient(family: str) -> dict[str, Any]:
    return {"resourceType": "Patient", "name": [{"family": family}]}


def test_another_task_runs_write_leaves_this_one_cached_and_its_own_is_seen_at_once(
    server: Server, api: httpx.Client
) -> None:
    (mine, my_base), (theirs, their_base) = _two_started(api, server)
    with server.client(mine.token) as me, server.client(theirs.token) as them:
        assert ok(me.get(f"{my_base}/Patient", params={"family": "Scope"}))["total"] == 0  # warms
        ok(them.get(f"{their_base}/Patient"))
        ok(them.post(f"{their_base}/Patient", json=_patient("Scope")), 201)
        with _statements(server) as statements:
            answer = ok(me.get(f"{my_base}/Patient", params={"family": "Scope"}))
        assert answer["total"] == 0
        assert statements == [], "another task run's write left this one's rows and index current"

        ok(me.post(f"{my_base}/Patient", json=_patient("Scope")), 201)
        ok(them.post(f"{their_base}/Patient", json=_patient("Scope")), 201)
        assert ok(me.get(f"{my_base}/Patient", params={"family": "Scope"}))["total"] == 1
        with _statements(server) as statements:
            ok(me.get(f"{my_base}/Patient", params={"family": "Scope"}))
        assert statements == []

        # Its own task run ends: its next request is refused at once; the other's stays cached.
        assert ok(them.get(f"{their_base}/Patient", params={"family": "Scope"}))["total"] == 2  # warms
        ok(me.post(mine.task_runs[0]["complete_url"]))
        assert me.get(f"{my_base}/Patient").status_code == 409
        with _statements(server) as statements:
            assert ok(them.get(f"{their_base}/Patient", params={"family": "Scope"}))["total"] == 2
        assert statements == [], "a complete of another task run leaves this one cached"


def test_across_workers_only_the_writes_of_a_task_run_reload_its_cached_reads(
    server: Server, api: httpx.Client
) -> None:
    """Two workers (each app its own engine and caches) on one database: a write on another task
    run through the second worker costs the first no SQL on its next warm read; a write on this
    task run through the second worker is what the first's next read answers."""
    (mine, my_base), (theirs, their_base) = _two_started(api, server)
    with (
        serving(server) as second,
        server.client(mine.token) as me,
        second.client(mine.token) as me_elsewhere,
        second.client(theirs.token) as them_elsewhere,
    ):
        assert ok(me.get(f"{my_base}/Patient", params={"family": "Workers"}))["total"] == 0  # warms
        ok(them_elsewhere.post(f"{their_base}/Patient", json=_patient("Workers")), 201)
        with _statements(server, second) as statements:
            assert ok(me.get(f"{my_base}/Patient", params={"family": "Workers"}))["total"] == 0
        assert statements == [], "another worker's write on another task run"

        ok(me_elsewhere.post(f"{my_base}/Patient", json=_patient("Workers")), 201)
        with _statements(server) as statements:
            assert ok(me.get(f"{my_base}/Patient", params={"family": "Workers"}))["total"] == 1
        assert statements, "this task run's write through the other worker: read again"

        ok(me_elsewhere.post(mine.task_runs[0]["complete_url"]))
        refused = me.get(f"{my_base}/Patient")
        assert refused.status_code == 409, refused.text
