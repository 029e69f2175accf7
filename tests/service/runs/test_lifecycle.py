"""The run lifecycle of SPEC §1.1: start/complete/cancel rules, concurrency, deadlines found on read
and by the sweeper, token expiry, frozen snapshots. Clocks are moved by editing rows, not by waiting."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from assay.service.runs.sweeper import due_run_ids, take_lease
from assay.store import utcnow
from assay.store.models import BenchmarkRun, TaskRun
from tests.service.builders import FAILS, PASSES, criterion, error, make_benchmark, ok, start_run
from tests.service.conftest import Server


def _set(server: Server, model: type[Any], ident: str, **values: Any) -> None:
    with server.database.transaction() as session:
        row = session.get(model, ident)
        for key, value in values.items():
            setattr(row, key, value)
    if server.tokens is not None:  # a run's token row never changes through the API: workers cache it
        server.tokens.clear()


def _status(server: Server, ident: str) -> str:
    with server.database.transaction() as session:
        return session.get(TaskRun, ident).status  # type: ignore[union-attr]


def test_start_rules_and_concurrency(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(FAILS)]])
    run = start_run(api, catalog.benchmark_id)
    first, second = (task_run["id"] for task_run in run.task_runs)
    with server.client(run.token) as agent:
        error(agent.post(f"/v1/task-runs/{first}/complete"), 409, "CONFLICT")
        started = ok(agent.post(f"/v1/task-runs/{first}/start"))
        assert ok(agent.post(f"/v1/task-runs/{first}/start")) == started
        details = error(agent.post(f"/v1/task-runs/{second}/start"), 409, "CONFLICT")
        assert details["started_task_run_ids"] == [first]
        assert ok(agent.get(f"/v1/benchmark-runs/{run.id}"))["phase"] == "started"
        ok(agent.post(f"/v1/task-runs/{first}/complete"))
        error(agent.post(f"/v1/task-runs/{first}/start"), 409, "CONFLICT")
        assert ok(agent.get(f"/v1/benchmark-runs/{run.id}"))["phase"] == "started"
        ok(agent.post(f"/v1/task-runs/{second}/start"))
        ok(agent.post(f"/v1/task-runs/{second}/complete"))
        final = ok(agent.get(f"/v1/benchmark-runs/{run.id}"))
    assert (final["phase"], final["status"], final["score"], final["verdict"]) == (
        "completed",
        "completed",
        0.5,
        "partial",
    )


def test_concurrency_two_allows_two(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]] * 3, concurrency=2)
    run = start_run(api, catalog.benchmark_id)
    with server.client(run.token) as agent:
        for task_run in run.task_runs[:2]:
            ok(agent.post(task_run["start_url"]))
        error(agent.post(run.task_runs[2]["start_url"]), 409, "CONFLICT")


def test_deadline_found_lazily_on_read(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]], timeout=600)
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        started = ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
        detail = ok(api.get(f"/task-runs/{task_run_id}"))
        assert detail["deadline_at"] == started["deadline_at"]
        assert detail["deadline_at"] > detail["started_at"]
        _set(server, TaskRun, task_run_id, deadline_at=utcnow() - timedelta(seconds=1))
        detail = ok(api.get(f"/task-runs/{task_run_id}"))
        assert (detail["status"], detail["phase"], detail["score"], detail["verdict"]) == (
            "timed_out",
            "completed",
            0.0,
            "fail",
        )
        result = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert result["status"] == "timed_out" and result["checks"] == [] and result["score"] == 0.0
    assert ok(api.get("/criterion-runs", params={"task_run_id": task_run_id}))["data"] == []
    assert ok(api.get(f"/benchmark-runs/{run.id}"))["verdict"] == "fail"


def test_sweeper_times_out_unread_runs(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
    _set(server, TaskRun, task_run_id, deadline_at=utcnow() - timedelta(seconds=1))
    for _ in range(300):  # the test server sweeps every 0.2 s
        if _status(server, task_run_id) != "active":
            break
        time.sleep(0.05)
    assert _status(server, task_run_id) == "timed_out"


def test_sweeper_lease_is_held_by_one_worker(server: Server) -> None:
    now, name, hour = utcnow(), f"test-{uuid.uuid4().hex[:8]}", timedelta(hours=1)
    with server.database.transaction() as session:
        assert take_lease(session, "worker-a", hour, now, name)
    with server.database.transaction() as session:
        assert not take_lease(session, "worker-b", hour, now, name)
    with server.database.transaction() as session:
        assert take_lease(session, "worker-a", hour, now, name)
    with server.database.transaction() as session:
        assert take_lease(session, "worker-b", hour, now + 2 * hour, name)


def test_sweeper_picks_only_runs_with_something_due(server: Server, api: httpx.Client) -> None:
    """An expired token is due only for task runs that never started: a started one keeps its deadline."""
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(PASSES)]], concurrency=2)
    run = start_run(api, catalog.benchmark_id)
    first, second = run.task_runs
    with server.client(run.token) as agent:
        ok(agent.post(first["start_url"]))
        ok(agent.post(second["start_url"]))
    now = utcnow()
    _set(server, BenchmarkRun, run.id, token_expires_at=now - timedelta(seconds=1))
    with server.database.transaction() as session:
        assert run.id not in due_run_ids(session, now)
    with server.database.transaction() as session:  # later, once the deadlines have passed
        assert run.id in due_run_ids(session, now + timedelta(days=30))


def test_token_expiry_cancels_unstarted_task_runs(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(PASSES)]])
    run = start_run(api, catalog.benchmark_id)
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        ok(agent.post(run.task_runs[0]["complete_url"]))
    _set(server, BenchmarkRun, run.id, token_expires_at=utcnow() - timedelta(seconds=1))
    with server.client(run.token) as agent:
        error(agent.get(f"/v1/benchmark-runs/{run.id}"), 401, "UNAUTHORIZED")
    detail = ok(api.get(f"/benchmark-runs/{run.id}"))
    assert [tr["status"] for tr in detail["task_runs"]] == ["completed", "cancelled"]
    assert (detail["phase"], detail["score"], detail["verdict"]) == ("completed", 0.5, "partial")


def test_token_lifetime_covers_the_timeouts(api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]] * 2, timeout=86400)
    created = start_run(api, catalog.benchmark_id).created
    detail = ok(api.get(f"/benchmark-runs/{created['benchmark_run_id']}"))
    start = datetime.fromisoformat(detail["created_at"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(detail["bearer_token_expires_at"].replace("Z", "+00:00"))
    assert end - start == timedelta(days=2)


def test_cancel(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(
        api, [[criterion(PASSES)], [criterion(PASSES)], [criterion(PASSES)]], concurrency=3
    )
    run = start_run(api, catalog.benchmark_id)
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        ok(agent.post(run.task_runs[0]["complete_url"]))
        ok(agent.post(run.task_runs[1]["start_url"]))
    cancelled = ok(api.post(f"/task-runs/{run.task_runs[1]['id']}/cancel"))
    assert (cancelled["status"], cancelled["score"]) == ("cancelled", 0.0)
    error(api.post(f"/task-runs/{run.task_runs[1]['id']}/cancel"), 409, "CONFLICT")
    final = ok(api.post(f"/benchmark-runs/{run.id}/cancel"))
    assert (final["phase"], final["status"]) == ("completed", "cancelled")
    assert [tr["status"] for tr in final["task_runs"]] == ["completed", "cancelled", "cancelled"]
    assert abs(final["score"] - 1 / 3) < 1e-12 and final["verdict"] == "partial"
    error(api.post(f"/benchmark-runs/{run.id}/cancel"), 409, "CONFLICT")
    with server.client(run.token) as agent:
        error(agent.post(run.task_runs[2]["start_url"]), 409, "CONFLICT")


def test_snapshot_is_frozen_at_creation(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES, label="original")]])
    run = start_run(api, catalog.benchmark_id)
    ok(api.patch(f"/criteria/{catalog.criteria[0]['id']}", json={"label": "edited", "assertion": FAILS}))
    ok(api.post("/criteria", json={"task_id": catalog.task_ids[0], **criterion(FAILS, label="new")}), 201)
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"name": "renamed"}))
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        result = ok(agent.post(run.task_runs[0]["complete_url"]))
    assert [c["label"] for c in result["checks"]] == ["original"] and result["score"] == 1.0
    snapshot = ok(api.get(f"/task-runs/{run.task_runs[0]['id']}"))["snapshot"]
    assert snapshot["task"]["name"] == "task 0" and snapshot["criteria"][0]["assertion"] == PASSES


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ({"step": "summon_dragon"}, "'summon_dragon' is not supported"),
        # A step its surface cannot run fails the start with the reason, naming the step.
        ({"step": "drop_file_inbox", "path": "../a.txt", "content": "x"}, "climbs above the root"),
    ],
)
def test_scenario_step_that_cannot_run_fails_the_start(
    server: Server, api: httpx.Client, step: dict[str, str], reason: str
) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"scenario": [step]}))
    run = start_run(api, catalog.benchmark_id)
    with server.client(run.token) as agent:
        details = error(agent.post(run.task_runs[0]["start_url"]), 409, "CONFLICT")
        assert reason in details["reason"]
        error(agent.post(run.task_runs[0]["start_url"]), 409, "CONFLICT")
        summary = ok(agent.get(f"/v1/benchmark-runs/{run.id}"))
    assert summary["task_runs"][0]["status"] == "failed" and summary["phase"] == "completed"
