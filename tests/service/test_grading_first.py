"""Grading first (issue 9, `service/priority.py`): while a worker runs a `complete`, agent reads
arriving at its fast path wait for it — for at most `priority.HOLD` — so the grading is not
interleaved with them step by step on a busy event loop. Through the real server: a `complete`
held inside its handler, a warm run-token search sent meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from assay.service import priority
from assay.service.runs import actions

from .builders import make_benchmark, ok, start_run
from .conftest import Server


@contextmanager
def _held_complete(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(entered, release): a `complete` signals `entered` inside its handler, then waits for `release`."""
    entered, release = threading.Event(), threading.Event()
    original = actions.complete_task_run

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        assert release.wait(30), "the test never let the complete go"
        return original(*args, **kwargs)

    monkeypatch.setattr(actions, "complete_task_run", held)
    try:
        yield entered, release
    finally:
        release.set()


def _two_started_runs(server: Server, api: httpx.Client) -> tuple[tuple[str, str], tuple[str, str]]:
    """(token, task run id) of an agent's run, warm on the fast path, and of a run to complete."""
    started = []
    benchmark_id = make_benchmark(api, [[]]).benchmark_id
    for _ in range(2):
        run = start_run(api, benchmark_id)
        with server.client(run.token) as client:
            ok(client.post(run.task_runs[0]["start_url"]))
        started.append((run.token, run.task_runs[0]["id"]))
    agent_token, agent_run = started[0]
    with server.client(agent_token) as agent:
        for _ in range(2):  # token, rows and FHIR index now cached in this worker
            ok(agent.get(f"/v1/task-runs/{agent_run}/fhir/Patient"))
    return started[0], started[1]


@contextmanager
def _grading(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch, hold: float
) -> Iterator[tuple[Callable[[], Future[httpx.Response]], Future[httpx.Response], threading.Event]]:
    """(send a warm agent read, the `complete` held in its handler, its release), with `HOLD` = `hold`."""
    (agent_token, agent_run), (grader_token, graded_run) = _two_started_runs(server, api)
    monkeypatch.setattr(priority, "HOLD", hold)
    with (
        _held_complete(monkeypatch) as (entered, release),
        ThreadPoolExecutor(2) as pool,
        server.client(agent_token) as agent,
        server.client(grader_token) as grader,
    ):
        completing = pool.submit(grader.post, f"/v1/task-runs/{graded_run}/complete")
        assert entered.wait(10), "the complete reached its handler"
        yield (lambda: pool.submit(agent.get, f"/v1/task-runs/{agent_run}/fhir/Patient")), completing, release


def test_an_agent_read_waits_while_its_worker_grades(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _grading(server, api, monkeypatch, hold=30.0) as (read, completing, release):
        answer = read()
        time.sleep(0.3)  # ungated, the warm read answers in a few milliseconds
        assert not answer.done(), "the agent read waits while the worker grades"
        release.set()
        assert ok(completing.result(10))["status"] == "completed"
        assert ok(answer.result(10))["resourceType"] == "Bundle", "and is answered once it has ended"


def test_an_agent_read_waits_for_a_grading_at_most_the_hold(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _grading(server, api, monkeypatch, hold=0.2) as (read, completing, release):
        began = time.perf_counter()
        assert ok(read().result(10))["resourceType"] == "Bundle"
        waited = time.perf_counter() - began
        assert not completing.done(), "answered while the grading still runs"
        assert waited >= 0.2, f"after the hold ({waited:.3f} s)"
        release.set()
        assert ok(completing.result(10))["status"] == "completed"
