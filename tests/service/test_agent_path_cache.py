"""The agent path's per-worker caches (issue 9) are never stale: every committed change moves the
change epoch (`store/epoch.py`), and a cached task run or FHIR index is used only while the epoch
is the one read before it was loaded. A warm search is served on the event loop with no thread
hand-off and no SQL; anything that changed — here, in another worker, or behind the API's back
through SQLAlchemy — is seen by the very next request."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.sandboxes.fhir import routes as fhir_routes
from assay.service.sandboxes import routes as sandbox_routes
from assay.store import Database, sqlite_url, utcnow
from assay.store.epoch import epoch_of
from assay.store.models import Lease, Organization, TaskRun

from .builders import make_benchmark, ok, start_run
from .conftest import POSTGRES_URL, Server


def test_the_epoch_moves_on_committed_writes_only_and_every_worker_sees_it(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    database, other_worker = Database(url), Database(url)
    try:
        database.migrate()
        epoch, seen_elsewhere = epoch_of(database.engine), epoch_of(other_worker.engine)
        first = epoch.current()
        assert first is not None and seen_elsewhere.current() == first
        with database.reading() as session:
            session.query(Organization).all()
        assert epoch.current() == first, "a read moves nothing"
        with database.transaction() as session:
            session.add(Lease(name="quiet", holder="h", expires_at=utcnow()))
        assert epoch.current() == first, "the sweeper's lease (like the event log) is not watched"
        with database.transaction() as session:
            session.add(Organization(id="org_epoch", name="epoch test", created_at=utcnow()))
        second = epoch.current()
        assert second != first, "a committed write moves it"
        assert seen_elsewhere.current() == second, "in every process that opened the database"
        with other_worker.transaction() as session:
            session.get(Organization, "org_epoch").name = "renamed"  # type: ignore[union-attr]
        assert epoch.current() not in (first, second)
    finally:
        database.dispose()
        other_worker.dispose()


@pytest.mark.skipif(not POSTGRES_URL, reason="needs ASSAY_TEST_POSTGRES_URL")
def test_postgresql_has_no_epoch_so_nothing_is_cached() -> None:
    """Instances on PostgreSQL may run on several machines: no shared file, every request reads."""
    database = Database(str(POSTGRES_URL))
    try:
        assert epoch_of(database.engine).current() is None
    finally:
        database.dispose()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    """Every worker-thread hand-off of the surface dependency and the FHIR routes, from now on."""
    calls: list[Callable[..., Any]] = []
    for module in (fhir_routes, sandbox_routes):
        original = module.run_in_threadpool

        async def counted(func: Callable[..., Any], *args: Any, _original: Any = original) -> Any:
            calls.append(func)
            return await _original(func, *args)

        monkeypatch.setattr(module, "run_in_threadpool", counted)
    return calls


def test_a_warm_search_takes_no_thread_and_every_change_is_seen_at_once(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = server.backend == "sqlite"  # PostgreSQL reads every time (no epoch)
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    base = f"/v1/task-runs/{task_run_id}/fhir"
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        assert ok(agent.get(f"{base}/Patient", params={"family": "Epoch"}))["total"] == 0  # warms
        calls = _counting(monkeypatch)
        assert ok(agent.get(f"{base}/Patient", params={"family": "Epoch"}))["total"] == 0
        assert ok(agent.get(f"{base}/metadata"))["resourceType"] == "CapabilityStatement"
        if cached:
            assert calls == [], "served from the worker's caches on the event loop"

        created = agent.post(
            f"{base}/Patient", json={"resourceType": "Patient", "name": [{"family": "Epoch"}]}
        )
        assert created.status_code == 201
        found = ok(agent.get(f"{base}/Patient", params={"family": "Epoch"}))
        assert found["total"] == 1, "a write is seen by the next search"
        patient_id = created.json()["id"]
        assert ok(agent.get(f"{base}/Patient/{patient_id}"))["id"] == patient_id

        # Another worker (its own engine on the same database) moves the deadline into the past:
        # the cached row's deadline no longer holds, and the next request is refused at once. (A
        # deadline, not a hand-set end state, so the database stays consistent for other tests.)
        other_worker = Database(server.database.url)
        try:
            with other_worker.transaction() as session:
                row = session.get(TaskRun, task_run_id)
                assert row is not None
                row.deadline_at = utcnow() - timedelta(seconds=1)
        finally:
            other_worker.dispose()
        refused = agent.get(f"{base}/Patient", params={"family": "Epoch"})
        assert refused.status_code == 409, refused.text
        assert "passed its deadline" in refused.text


def test_complete_is_seen_by_the_next_request_after_warm_ones(server: Server, api: httpx.Client) -> None:
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        for _ in range(3):
            ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient"))
            ok(agent.get(f"/v1/benchmark-runs/{run.id}/fhir/Patient"))
        ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
        assert agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient").status_code == 409
        assert agent.get(f"/v1/benchmark-runs/{run.id}/fhir/Patient").status_code == 409
