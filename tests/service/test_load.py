"""Issue 9's reproduction, bounded: 200 concurrent clients against a real `assay serve` process.

Before, about 41 concurrent requests froze the default SQLite server for good (the session
dependency held the write lock across thread hand-offs until all 40 worker threads waited for it),
and PostgreSQL with one worker answered 500 once its connection pool ran dry. Here 200 clients at
once — unauthenticated requests, org-key reads and writes, run-token FHIR searches, reads and
creates, and a few `complete`s (two at once on each task run) — must each be answered (2xx, the
expected 401, or 503 with `Retry-After`; never a 500, never a hang: every request has a timeout),
twice over, and the server must answer normally afterwards and stop on SIGTERM. On SQLite and
PostgreSQL, with 1 and 2 workers. The bounds are there so a regression fails instead of hanging
the suite; nothing is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from assay.store.database import FairLock

from .builders import NOTE_WRITTEN, PASSES, ok, one_patient_bundle
from .conftest import BOOTSTRAP_KEY
from .processes import serving

CONCURRENT = 200
"""More than AnyIO's 40 worker threads (the SQLite freeze) and than PostgreSQL's pool of 10 + 32."""
COMPLETED_PER_BURST = 3
"""Task runs completed in each burst (each by two concurrent `complete`s)."""
REQUEST_TIMEOUT = 120.0
"""Per request: an answer slower than this is a hang (a 503 comes after at most ~10 s of waiting)."""

BUNDLE = one_patient_bundle("Load")
OBSERVATION = {
    "resourceType": "Observation",
    "status": "final",
    "code": {"coding": [{"system": "urn:test", "code": "note"}]},
    "subject": {"reference": "Patient/p1"},
}


@dataclass
class Agent:
    token: str
    busy: str
    """The task run the FHIR traffic goes to (completed only after the bursts)."""
    to_complete: list[str]


def _prepare(url: str) -> Agent:
    """One benchmark run with a FHIR dataset and 1 + 2 × `COMPLETED_PER_BURST` task runs, all started."""
    tasks = 1 + 2 * COMPLETED_PER_BURST
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}, timeout=120) as api:
        tag = uuid.uuid4().hex[:8]
        dataset = ok(api.post("/datasets", json={"name": f"ehr {tag}", "type": "fhir", "data": BUNDLE}), 201)
        benchmark = ok(api.post("/benchmarks", json={"name": f"load {tag}", "concurrency": tasks}), 201)
        for i in range(tasks):
            body = {"benchmark_id": benchmark["id"], "name": f"task {i}", "dataset_ids": [dataset["id"]]}
            task = ok(api.post("/tasks", json=body), 201)
            for label, assertion in (("note", NOTE_WRITTEN), ("no SSN", PASSES)):
                criterion = {"task_id": task["id"], "label": label, "assertion": assertion}
                ok(api.post("/criteria", json=criterion), 201)
        run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    agent = {"Authorization": f"Bearer {run['bearer_token']}"}
    with httpx.Client(base_url=url, headers=agent, timeout=120) as client:
        for task_run in run["task_runs"]:
            ok(client.post(task_run["start_url"]))
    ids = [task_run["id"] for task_run in run["task_runs"]]
    return Agent(run["bearer_token"], ids[0], ids[1:])


async def _burst(
    url: str, agent: Agent, completing: list[str]
) -> list[tuple[str, httpx.Response | BaseException]]:
    """`CONCURRENT` requests at once, each tagged with its kind: a fifth unauthenticated, a fifth
    with the org key (reads and writes), three fifths run-token FHIR (searches, reads, creates),
    and two `complete`s on each task run of `completing` in place of FHIR requests."""
    limits = httpx.Limits(max_connections=CONCURRENT, max_keepalive_connections=0)
    org = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
    run = {"Authorization": f"Bearer {agent.token}"}
    fhir = f"/v1/task-runs/{agent.busy}/fhir"
    completes = [task_run for task_run in completing for _ in range(2)]
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT, limits=limits) as client:

        async def one(i: int) -> tuple[str, httpx.Response | BaseException]:
            kind = ("anonymous", "org", "fhir", "fhir", "fhir")[i % 5]
            try:
                if kind == "anonymous":
                    return kind, await client.get("/benchmarks")
                if kind == "org":
                    if i % 2:
                        return kind, await client.get("/benchmarks", headers=org)
                    return kind, await client.post("/environments", headers=org, json={"name": f"load {i}"})
                if i % 5 == 2 and i // 5 < len(completes):
                    return "complete", await client.post(
                        f"/v1/task-runs/{completes[i // 5]}/complete", headers=run
                    )
                if i % 3 == 0:
                    return kind, await client.get(f"{fhir}/Patient", params={"family": "Load"}, headers=run)
                if i % 3 == 1:
                    return kind, await client.get(f"{fhir}/Patient/p1", headers=run)
                return kind, await client.post(f"{fhir}/Observation", json=OBSERVATION, headers=run)
            except BaseException as exc:  # a timeout or a dropped connection: no answer
                return kind, exc

        return await asyncio.gather(*(one(i) for i in range(CONCURRENT)))


EXPECTED = {"anonymous": {401}, "org": {200, 201}, "fhir": {200, 201}, "complete": {200}}


def _check_burst(url: str, agent: Agent, completing: list[str]) -> None:
    answers = asyncio.run(_burst(url, agent, completing))
    failures = [(kind, answer) for kind, answer in answers if not isinstance(answer, httpx.Response)]
    assert not failures, f"{len(failures)} of {CONCURRENT} requests got no answer: {failures[:3]!r}"
    seen: Counter[tuple[str, int]] = Counter()
    for kind, answer in answers:
        assert isinstance(answer, httpx.Response)
        seen[kind, answer.status_code] += 1
        if answer.status_code == 503:
            assert answer.headers.get("retry-after"), answer.text
            continue
        assert answer.status_code in EXPECTED[kind], (kind, answer.status_code, answer.text)
    assert sum(n for (kind, _), n in seen.items() if kind == "complete") == 2 * len(completing), seen
    results = {
        (answer.json()["task_run_id"], answer.json()["score"])
        for kind, answer in answers
        if kind == "complete" and isinstance(answer, httpx.Response) and answer.status_code == 200
    }
    assert len({task_run for task_run, _ in results}) == len(results), results  # one result per task run


def _check_still_answers_and_stops(served_url: str, agent: Agent, process: subprocess.Popen[bytes]) -> None:
    auth = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
    assert httpx.get(f"{served_url}/benchmarks", headers=auth, timeout=60).status_code == 200
    created = httpx.post(f"{served_url}/environments", headers=auth, json={"name": "after"}, timeout=60)
    assert created.status_code == 201, created.text
    run = {"Authorization": f"Bearer {agent.token}"}
    with httpx.Client(base_url=served_url, headers=run, timeout=60) as client:
        fhir = f"/v1/task-runs/{agent.busy}/fhir"
        assert client.get(f"{fhir}/Observation", params={"patient": "Patient/p1"}).status_code == 200
        completed = ok(client.post(f"/v1/task-runs/{agent.busy}/complete"))
        assert completed["verdict"] == "pass", completed  # the notes written under load were scored
        for task_run in agent.to_complete:  # every `complete` of the bursts was recorded once
            again = ok(client.get(f"/v1/task-runs/{task_run}"))
            assert again["phase"] == "completed" and again["score"] == 0.5, again  # no note: not written to
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)  # a bound, so a server that ignores SIGTERM fails the test


def _load(tmp_path: Path, database_url: str | None, workers: int) -> None:
    with serving(tmp_path / "data", database_url=database_url, key=BOOTSTRAP_KEY, workers=workers) as served:
        agent = _prepare(served.url)
        first, second = agent.to_complete[:COMPLETED_PER_BURST], agent.to_complete[COMPLETED_PER_BURST:]
        _check_burst(served.url, agent, first)
        _check_burst(served.url, agent, second)
        _check_still_answers_and_stops(served.url, agent, served.process)


@pytest.mark.parametrize("workers", [1, 2])
def test_sqlite_answers_200_concurrent_clients(tmp_path: Path, workers: int) -> None:
    _load(tmp_path, None, workers)


@pytest.mark.postgres
@pytest.mark.parametrize("workers", [1, 2])
def test_postgres_answers_200_concurrent_clients(
    tmp_path: Path, workers: int, _postgres_database: str
) -> None:
    _load(tmp_path, _postgres_database, workers)


def test_fair_lock_serves_waiters_in_arrival_order() -> None:
    """The sweeper (or a `complete`) queued for the SQLite write lock is not overtaken by threads
    that arrive after it, however busy the server is."""
    import threading

    lock = FairLock()
    assert lock.acquire(1)
    order: list[int] = []
    arrived = threading.Semaphore(0)
    threads = []
    for i in range(5):

        def wait(i: int = i) -> None:
            arrived.release()
            assert lock.acquire(30)
            order.append(i)
            lock.release()

        thread = threading.Thread(target=wait)
        thread.start()
        arrived.acquire()
        while len(lock._waiters) < i + 1:  # bounded by the thread reaching its wait
            time.sleep(0.001)
        threads.append(thread)
    newcomer: list[bool] = []
    late = threading.Thread(target=lambda: newcomer.append(lock.acquire(0.01)))
    late.start()
    late.join(timeout=30)
    assert newcomer == [False]  # a newcomer times out instead of jumping the queue
    lock.release()
    for thread in threads:
        thread.join(timeout=30)
    assert order == [0, 1, 2, 3, 4]


LOAD_CLIENTS = 16
COMPLETES_UNDER_LOAD = 5
COMPLETE_DEADLINE = 60.0
"""Per `complete` while the agent load runs: generous (a starved one waited behind the event log
for ever longer), so only starvation fails, never a slow machine."""


async def _agent_load(url: str, agent: Agent, stop: asyncio.Event, answered: Counter[int]) -> None:
    """`LOAD_CLIENTS` keep-alive clients sending run-token FHIR searches and reads, each its next as
    soon as the last is answered, until `stop` (bounded by the test's own bound on the completes)."""
    run = {"Authorization": f"Bearer {agent.token}"}
    fhir = f"/v1/task-runs/{agent.busy}/fhir"
    limits = httpx.Limits(max_connections=LOAD_CLIENTS)
    async with httpx.AsyncClient(base_url=url, headers=run, timeout=REQUEST_TIMEOUT, limits=limits) as client:

        async def one(i: int) -> None:
            while not stop.is_set():
                if i % 2:
                    answer = await client.get(f"{fhir}/Patient", params={"family": "Load"})
                else:
                    answer = await client.get(f"{fhir}/Patient/p1")
                answered[answer.status_code] += 1

        await asyncio.gather(*(one(i) for i in range(LOAD_CLIENTS)))


def _events_stored(data_dir: Path) -> int:
    with contextlib.closing(sqlite3.connect(data_dir / "assay.db", timeout=60)) as db:
        return int(db.execute("SELECT count(*) FROM sandbox_events").fetchone()[0])


def test_complete_is_answered_while_the_agent_path_is_loaded(tmp_path: Path) -> None:
    """`complete` gets through while 16 clients keep the agent path busy (issue 9): each flushes the
    event log and takes its turn at the write lock in bounded time, instead of waiting behind an
    event log that grew faster than it was written (the fast path served from the event loop had
    `complete` at 5 s and rising). Every agent request answered is in the event log after
    shutdown: nothing lost to the flushes written on `complete`'s thread."""
    data_dir = tmp_path / "data"
    with serving(data_dir, database_url=None, key=BOOTSTRAP_KEY) as served:
        agent = _prepare(served.url)
        before = _events_stored(data_dir)
        answered: Counter[int] = Counter()
        completed: list[dict[str, object]] = []

        async def scenario() -> None:
            stop = asyncio.Event()
            load = asyncio.create_task(_agent_load(served.url, agent, stop, answered))
            try:
                run = {"Authorization": f"Bearer {agent.token}"}
                async with httpx.AsyncClient(base_url=served.url, headers=run) as client:
                    while sum(answered.values()) < 2 * LOAD_CLIENTS and not load.done():
                        await asyncio.sleep(0.05)  # the load is under way (bounded by its own timeouts)
                    for task_run in agent.to_complete[:COMPLETES_UNDER_LOAD]:
                        reply = await asyncio.wait_for(
                            client.post(f"/v1/task-runs/{task_run}/complete", timeout=COMPLETE_DEADLINE),
                            COMPLETE_DEADLINE,
                        )
                        completed.append(ok(reply))
                        assert not load.done(), "the load stopped before the completes were done"
            finally:
                stop.set()
                await load

        asyncio.run(scenario())
        assert [c["phase"] for c in completed] == ["completed"] * COMPLETES_UNDER_LOAD, completed
        assert set(answered) == {200}, answered
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(timeout=60)
    assert _events_stored(data_dir) - before == sum(answered.values())
