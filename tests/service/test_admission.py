"""Admission (`service/priority.py`, `ASSAY_AGENT_REQUESTS`): a serving worker answers at most a
few agent requests at once; the next wait their turn in arrival order, each for at most
`ADMISSION_WAIT`. The slot bookkeeping on an event loop, then through the real server: an agent's
FHIR create held inside its handler, another agent's tool call sent meanwhile. A warm read answered
on the loop takes no slot."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from assay.sandboxes.fhir import actions as fhir_actions
from assay.service import priority
from assay.service.priority import Admission
from assay.service.settings import Settings

from .builders import make_benchmark, ok, start_run
from .conftest import Server, serving

# -- the slots ----------------------------------------------------------------------------------


def test_requests_past_the_limit_wait_and_are_let_in_in_arrival_order() -> None:
    async def scenario() -> list[str]:
        admission, order = Admission(2), []
        held = [await admission.enter(), await admission.enter()]
        assert held == [True, True] and admission.answering == 2

        async def late(name: str) -> None:
            assert await admission.enter(), f"{name} was handed a slot"
            order.append(name)

        waiting = [asyncio.create_task(late(name)) for name in ("third", "fourth")]
        await asyncio.sleep(0.05)
        assert order == [], "both wait while two are answered"
        admission.leave()
        await asyncio.sleep(0.01)
        assert order == ["third"], "the first to wait goes first"
        admission.leave()
        await asyncio.gather(*waiting)
        assert admission.answering == 2, "each slot handed over, none lost or added"
        admission.leave()
        admission.leave()
        assert admission.answering == 0
        return order

    assert asyncio.run(scenario()) == ["third", "fourth"]


def test_a_request_waits_at_most_the_admission_wait_then_goes_without_a_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(priority, "ADMISSION_WAIT", 0.1)

    async def scenario() -> None:
        admission = Admission(1)
        assert await admission.enter()
        began = time.perf_counter()
        assert await admission.enter() is False, "waited out: goes ahead, holding no slot"
        assert time.perf_counter() - began >= 0.1
        admission.leave()
        assert admission.answering == 0, "the slot count is back to nothing"
        assert await admission.enter(), "and the next finds a free slot at once"

    asyncio.run(scenario())


def test_a_cancelled_waiter_takes_no_slot_and_one_handed_a_slot_passes_it_on() -> None:
    async def scenario() -> None:
        admission = Admission(1)
        assert await admission.enter()
        gone = asyncio.create_task(admission.enter())
        await asyncio.sleep(0.01)
        gone.cancel()  # a client that went away while waiting
        with pytest.raises(asyncio.CancelledError):
            await gone
        handed = asyncio.create_task(admission.enter())
        after = asyncio.create_task(admission.enter())
        await asyncio.sleep(0.01)
        admission.leave()  # the slot goes to `handed` ...
        handed.cancel()  # ... which is cancelled before it runs again: the slot goes on to `after`
        with pytest.raises(asyncio.CancelledError):
            await handed
        assert await after is True
        assert admission.answering == 1
        admission.leave()
        assert admission.answering == 0

    asyncio.run(scenario())


def test_no_limit_never_waits() -> None:
    async def scenario() -> None:
        admission = Admission(0)
        assert [await admission.enter() for _ in range(100)] == [False] * 100
        assert admission.answering == 0

    asyncio.run(scenario())


@pytest.mark.parametrize(("value", "limit"), [("1", 1), ("0", 0)])
def test_the_limit_is_read_from_the_environment(value: str, limit: int) -> None:
    assert Settings.from_env({"ASSAY_AGENT_REQUESTS": value}).agent_requests == limit
    assert Settings.from_env({}).agent_requests == 2


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="ASSAY_AGENT_REQUESTS"):
        Settings.from_env({"ASSAY_AGENT_REQUESTS": "-1"})


# -- through the server -------------------------------------------------------------------------

_PATIENT = json.dumps({"resourceType": "Patient", "name": [{"family": "Held"}]})
_FHIR_JSON = {"content-type": "application/fhir+json"}
_SEARCH = {"resource_type": "Patient"}


def _tool_call(task_run_id: str) -> str:
    return f"/v1/task-runs/{task_run_id}/tools/fhir_search"


@contextmanager
def _held_create(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(entered, release): the first FHIR create signals `entered` inside its handler, then waits."""
    entered, release = threading.Event(), threading.Event()
    original = fhir_actions.create

    def held(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            assert release.wait(30), "the test never let the create go"
        return original(*args, **kwargs)

    monkeypatch.setattr(fhir_actions, "create", held)
    try:
        yield entered, release
    finally:
        release.set()


def _agents(server: Server, api: httpx.Client) -> list[tuple[str, str]]:
    """(token, task run id) of two agents' started runs, each warm on the fast path."""
    benchmark_id = make_benchmark(api, [[]]).benchmark_id
    agents = []
    for _ in range(2):
        run = start_run(api, benchmark_id)
        task_run_id = run.task_runs[0]["id"]
        with server.client(run.token) as client:
            ok(client.post(f"/v1/task-runs/{task_run_id}/start"))
            for _ in range(2):
                ok(client.get(f"/v1/task-runs/{task_run_id}/fhir/Patient"))
        agents.append((run.token, task_run_id))
    return agents


@contextmanager
def _first_agent_held(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch, limit: int
) -> Iterator[tuple[Future[httpx.Response], threading.Event, httpx.Client, str, ThreadPoolExecutor]]:
    """(the first agent's FHIR create, held in its handler; its release; the second agent's client
    and task run id; a pool to send with), on a server whose workers admit `limit` agent requests."""
    with serving(server, agent_requests=limit) as limited:
        (first_token, first_run), (second_token, second_run) = _agents(limited, api)
        with (
            _held_create(monkeypatch) as (entered, release),
            ThreadPoolExecutor(2) as pool,
            limited.client(first_token) as first,
            limited.client(second_token) as second,
        ):
            creating = pool.submit(
                first.post, f"/v1/task-runs/{first_run}/fhir/Patient", content=_PATIENT, headers=_FHIR_JSON
            )
            assert entered.wait(10), "the first agent's create reached its handler"
            yield creating, release, second, second_run, pool
            release.set()
            assert creating.result(10).status_code == 201


@pytest.mark.parametrize("limit", [1, 0])
def test_an_agent_request_waits_for_a_slot_of_its_worker(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    monkeypatch.setattr(priority, "ADMISSION_WAIT", 30.0)
    with _first_agent_held(server, api, monkeypatch, limit) as (_creating, release, second, second_run, pool):
        searching = pool.submit(second.post, _tool_call(second_run), json=_SEARCH)
        time.sleep(0.3)  # a tool's search answers in a few milliseconds
        assert ok(second.get(f"/v1/task-runs/{second_run}/fhir/Patient"))["resourceType"] == "Bundle", (
            "a warm read takes no slot"
        )
        if limit:
            assert not searching.done(), "the second agent's tool call waits for the worker's one slot"
        else:
            assert ok(searching.result(5)), "no limit: answered at once"
        release.set()
        assert ok(searching.result(10))


def test_an_agent_request_waits_for_a_slot_at_most_the_admission_wait(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(priority, "ADMISSION_WAIT", 0.2)
    with _first_agent_held(server, api, monkeypatch, 1) as (creating, _release, second, second_run, _pool):
        began = time.perf_counter()
        assert ok(second.post(_tool_call(second_run), json=_SEARCH))
        waited = time.perf_counter() - began
        assert not creating.done(), "answered while the slot is still held"
        assert waited >= 0.2, f"after the admission wait ({waited:.3f} s)"
