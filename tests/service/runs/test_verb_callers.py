"""A run's verbs resolve a token this worker has not cached inside their own transaction
(`deps.RunCallerInTransaction`, `OrgCallerInTransaction`): one transaction, on the handler's
thread, and the same refusals as every other route — 401 for a missing, unknown or expired token,
403 for another kind of key — with nothing written. And the worker that creates a run caches its
token, so the agent's `start` on the same connection looks nothing up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import httpx

from assay.store import utcnow
from assay.store.models import BenchmarkRun, TaskRun
from tests.listening import listening, on_request_thread
from tests.service.builders import PASSES, criterion, error, make_benchmark, ok, start_run
from tests.service.conftest import Server


@contextmanager
def _transactions(server: Server) -> Iterator[list[str]]:
    """The threads that began a transaction meanwhile (the server's background threads left out)."""
    begun: list[str] = []

    def count(_conn: Any) -> None:
        if on_request_thread():
            begun.append(threading.current_thread().name)

    with listening(server.database.engine, "begin", count):
        yield begun


def _forget_tokens(server: Server) -> None:
    assert server.tokens is not None
    server.tokens.clear()


def _started(server: Server, api: httpx.Client) -> tuple[str, str]:
    """(run token, task run id) of a started task run of a one-criterion benchmark."""
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
    return run.token, task_run_id


def test_complete_with_a_token_not_cached_here_is_one_transaction(server: Server, api: httpx.Client) -> None:
    token, task_run_id = _started(server, api)
    _forget_tokens(server)
    with server.client(token) as agent, _transactions(server) as begun:
        done = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert done["phase"] == "completed" and done["score"] == 1.0
    assert len(begun) == 1, begun  # the lookup is the transaction's first statement, not one of its own
    with server.client(token) as agent:  # and the token is cached now: a read needs no lookup
        assert ok(agent.get(f"/v1/task-runs/{task_run_id}"))["phase"] == "completed"


def test_rescore_with_an_api_key_is_one_transaction(server: Server, api: httpx.Client) -> None:
    token, task_run_id = _started(server, api)
    with server.client(token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    with _transactions(server) as begun:
        rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
    assert rescored["score"] == 1.0
    assert len(begun) == 1, begun


def test_verbs_refuse_bad_tokens_and_write_nothing(server: Server, api: httpx.Client) -> None:
    token, task_run_id = _started(server, api)
    _forget_tokens(server)
    complete = f"/v1/task-runs/{task_run_id}/complete"
    with server.client("vrl_run_" + "0" * 40) as stranger:
        error(stranger.post(complete), 401, "UNAUTHORIZED")
    with server.client("") as anonymous:
        error(anonymous.post(complete), 401, "UNAUTHORIZED")
    error(api.post(complete), 403, "FORBIDDEN")  # an org key may not complete
    with server.client(token) as agent:
        error(agent.post(f"/task-runs/{task_run_id}/rescore"), 403, "FORBIDDEN")  # nor a run token rescore
    with server.database.transaction() as session:
        task_run = session.get(TaskRun, task_run_id)
        assert task_run is not None and task_run.phase == "started"
        run = session.get(BenchmarkRun, task_run.benchmark_run_id)
        assert run is not None
        run.token_expires_at = utcnow() - timedelta(seconds=1)
    _forget_tokens(server)
    with server.client(token) as agent:
        assert "expired" in agent.post(complete).json()["error"]["message"]
    with server.database.transaction() as session:
        task_run = session.get(TaskRun, task_run_id)
        assert task_run is not None and task_run.phase == "started" and task_run.capture is None


def test_the_worker_that_created_a_run_knows_its_token(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    run = start_run(api, catalog.benchmark_id)
    looked_up: list[str] = []

    def by_token(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "benchmark_runs.token_hash = " in statement and on_request_thread():
            looked_up.append(statement)

    with (
        listening(server.database.engine, "before_cursor_execute", by_token),
        server.client(run.token) as agent,
    ):
        ok(agent.post(f"/v1/task-runs/{run.task_runs[0]['id']}/start"))
    assert looked_up == []
