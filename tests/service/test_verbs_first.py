"""A run's verbs first (`service/priority.py`): while a worker runs a `start` or a `complete`,
agent requests to a surface or a tool arriving at it wait — for at most `priority.HOLD` — so the
verb is not interleaved with them step by step on a busy event loop. Through the real server: a
verb held inside its handler, an agent request sent meanwhile."""

from __future__ import annotations

import json
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

_PATIENT = json.dumps({"resourceType": "Patient", "name": [{"family": "Waiting"}]})

AGENT_REQUESTS: dict[str, Callable[[httpx.Client, str], httpx.Response]] = {
    "warm FHIR read (fast path)": lambda agent, run: agent.get(f"/v1/task-runs/{run}/fhir/Patient"),
    "FHIR create (routed)": lambda agent, run: agent.post(
        f"/v1/task-runs/{run}/fhir/Patient",
        content=_PATIENT,
        headers={"content-type": "application/fhir+json"},
    ),
    "tool call": lambda agent, run: agent.post(
        f"/v1/task-runs/{run}/tools/fhir_search", json={"resource_type": "Patient"}
    ),
}
"""What an agent sends that waits: any method, on or off the fast path, surface or tool."""


@contextmanager
def _held(monkeypatch: pytest.MonkeyPatch, verb: str) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(entered, release): the verb's action signals `entered` inside its handler, then waits for
    `release`."""
    entered, release = threading.Event(), threading.Event()
    name = f"{verb}_task_run"
    original = getattr(actions, name)

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        assert release.wait(30), "the test never let the verb go"
        return original(*args, **kwargs)

    monkeypatch.setattr(actions, name, held)
    try:
        yield entered, release
    finally:
        release.set()


def _runs(server: Server, api: httpx.Client, verb: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """(token, task run id) of an agent's started run, warm on the fast path, and of a run for
    `verb` (started when the verb is `complete`)."""
    benchmark_id = make_benchmark(api, [[]]).benchmark_id
    agent, other = start_run(api, benchmark_id), start_run(api, benchmark_id)
    with server.client(agent.token) as client:
        ok(client.post(agent.task_runs[0]["start_url"]))
        for _ in range(2):  # token, rows and FHIR index now cached in this worker
            ok(client.get(f"/v1/task-runs/{agent.task_runs[0]['id']}/fhir/Patient"))
    if verb == "complete":
        with server.client(other.token) as client:
            ok(client.post(other.task_runs[0]["start_url"]))
    return (agent.token, agent.task_runs[0]["id"]), (other.token, other.task_runs[0]["id"])


@contextmanager
def _verb_running(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch, verb: str, hold: float, request: str
) -> Iterator[tuple[Callable[[], Future[httpx.Response]], Future[httpx.Response], threading.Event]]:
    """(send the agent's request, the verb held in its handler, its release), with `HOLD` = `hold`."""
    (agent_token, agent_run), (verb_token, verb_run) = _runs(server, api, verb)
    monkeypatch.setattr(priority, "HOLD", hold)
    send = AGENT_REQUESTS[request]
    with (
        _held(monkeypatch, verb) as (entered, release),
        ThreadPoolExecutor(2) as pool,
        server.client(agent_token) as agent,
        server.client(verb_token) as runner,
    ):
        running = pool.submit(runner.post, f"/v1/task-runs/{verb_run}/{verb}")
        assert entered.wait(10), f"the {verb} reached its handler"
        yield (lambda: pool.submit(send, agent, agent_run)), running, release


@pytest.mark.parametrize("request_kind", list(AGENT_REQUESTS))
@pytest.mark.parametrize("verb", ["start", "complete"])
def test_an_agent_request_waits_while_its_worker_runs_a_verb(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch, verb: str, request_kind: str
) -> None:
    with _verb_running(server, api, monkeypatch, verb, 30.0, request_kind) as (send, running, release):
        answer = send()
        time.sleep(0.3)  # not held, the agent's request answers in a few milliseconds
        assert not answer.done(), f"the agent's request waits while the worker runs a {verb}"
        release.set()
        assert ok(running.result(10))["task_run_id" if verb == "start" else "status"]
        assert answer.result(10).status_code in {200, 201}, "and is answered once the verb has ended"


def test_an_agent_request_waits_for_a_verb_at_most_the_hold(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _verb_running(server, api, monkeypatch, "complete", 0.2, "warm FHIR read (fast path)") as (
        send,
        running,
        release,
    ):
        began = time.perf_counter()
        assert ok(send().result(10))["resourceType"] == "Bundle"
        waited = time.perf_counter() - began
        assert not running.done(), "answered while the verb still runs"
        assert waited >= 0.2, f"after the hold ({waited:.3f} s)"
        release.set()
        assert ok(running.result(10))["status"] == "completed"


def test_a_run_read_is_not_held(server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only agent requests to surfaces and tools wait: reading a task run is not one. The `start`
    is held before its transaction (preparing its datasets), so on SQLite the read does not queue
    behind the start's write turn either."""
    (agent_token, agent_run), (verb_token, verb_run) = _runs(server, api, "start")
    monkeypatch.setattr(priority, "HOLD", 30.0)
    entered, release = threading.Event(), threading.Event()
    original = actions.prepare_start

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        assert release.wait(30), "the test never let the start go"
        return original(*args, **kwargs)

    monkeypatch.setattr(actions, "prepare_start", held)
    with (
        ThreadPoolExecutor(1) as pool,
        server.client(agent_token) as agent,
        server.client(verb_token) as runner,
    ):
        try:
            running = pool.submit(runner.post, f"/v1/task-runs/{verb_run}/start")
            assert entered.wait(10), "the start reached its handler"
            assert ok(agent.get(f"/v1/task-runs/{agent_run}", timeout=5))["task_run_id"] == agent_run
            assert not running.done()
        finally:
            release.set()
        assert ok(running.result(10))["task_run_id"] == verb_run
