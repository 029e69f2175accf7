"""The agent path's per-worker caches (issue 9) are never stale: every committed change moves the
change epoch (`store/epoch.py`), and a cached task run or FHIR index is used only while the epoch
is the one read before it was loaded. A warm search is served on the event loop with no thread
hand-off and no SQL; anything that changed — here, in another worker, or behind the API's back
through SQLAlchemy — is seen by the very next request."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text, update

from assay.sandboxes.fhir.routes import exchange as fhir_routes
from assay.service import fast_path
from assay.service.auth import cache as auth_cache
from assay.service.sandboxes import actions as sandbox_actions
from assay.service.sandboxes import routes as sandbox_routes
from assay.store import Database, sqlite_url, utcnow
from assay.store import epoch_postgres as epoch_module
from assay.store.epoch import epoch_of, reads_of
from assay.store.models import Lease, Organization, TaskRun

from .builders import make_benchmark, ok, start_run
from .conftest import Server, serving


def test_the_epoch_moves_on_committed_writes_only_and_every_worker_sees_it(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    database, other_worker = Database(url), Database(url)
    key = "tr_epoch_test"
    try:
        database.migrate()
        epoch, seen_elsewhere = epoch_of(database.engine), epoch_of(other_worker.engine)
        assert epoch.current() is None, "no key: nothing may be cached"
        first = epoch.current(key)
        assert first is not None and seen_elsewhere.current(key) == first
        with database.reading() as session:
            session.query(Organization).all()
        assert epoch.current(key) == first, "a read moves nothing"
        with database.transaction() as session:
            session.add(Lease(name="quiet", holder="h", expires_at=utcnow()))
            session.add(Organization(id="org_epoch", name="epoch test", created_at=utcnow()))
        assert epoch.current(key) == first, "tables no cache reads are not watched"
        with database.transaction() as session:
            session.execute(update(TaskRun).where(TaskRun.id == "tr_none").values(status="x"))
        second = epoch.current(key)
        assert second != first, "a committed write to a watched table moves it"
        assert seen_elsewhere.current(key) == second, "in every process that opened the database"
        with other_worker.transaction() as session:
            session.execute(text("UPDATE organizations SET name = 'renamed' WHERE id = 'org_epoch'"))
        assert epoch.current(key) not in (first, second), "SQL it cannot place moves it too"
    finally:
        database.dispose()
        other_worker.dispose()


@pytest.mark.postgres
def test_the_postgresql_epoch_is_read_once_per_request_and_moves_on_committed_writes_only(
    _postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instances on PostgreSQL may be on several machines: the epoch is a sequence in the database,
    bumped after each tracked commit and read once at the start of an agent request (`snapshot`).
    Outside such a request, after a write of this process, or when the read fails, there is none
    (the request reads SQL); a lost connection is reopened by the next read."""
    database, other_instance = Database(_postgres_database), Database(_postgres_database)
    monkeypatch.setattr(epoch_module, "RETRY_AFTER", 0.0)

    async def scenario() -> None:
        reads_of("tr_pg_epoch")  # this request's key, as `AssayApp` sets it from the path
        epoch, elsewhere = epoch_of(database.engine), epoch_of(other_instance.engine)
        assert epoch.remote and epoch.current() is None, "no request read it: nothing may be cached"
        await epoch.snapshot()
        first = epoch.current()
        assert first is not None
        with database.reading() as session:
            session.query(Organization).all()
        with database.transaction() as session:
            session.add(Lease(name=f"quiet-{uuid.uuid4().hex[:8]}", holder="h", expires_at=utcnow()))
            session.add(_organization())
        await epoch.snapshot()
        assert epoch.current() == first, "reads and tables no cache reads move nothing"

        with other_instance.transaction() as session:
            session.execute(_watched_write())
        assert epoch.current() == first, "the snapshot is this request's: read before it loaded"
        await epoch.snapshot()
        second = epoch.current()
        assert second not in (None, first), "another instance's committed write moves it"
        await elsewhere.snapshot()
        assert elsewhere.current() == second

        with database.transaction() as session:
            session.execute(_watched_write())
        assert epoch.current() is None, "a write of this process voids the request's snapshot"
        await epoch.snapshot()
        third = epoch.current()
        assert third not in (None, first, second)

        with database.reading() as session:  # the reader's connection is lost
            session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": _reader_pid(epoch)})
        await epoch.snapshot()
        assert epoch.current() == third, "a connection the server closed is replaced at once"
        await epoch.aclose()
        await elsewhere.aclose()

    try:
        database.migrate()
        asyncio.run(scenario())
    finally:
        database.dispose()
        other_instance.dispose()


def test_a_request_arriving_during_an_epoch_read_has_one_sent_for_it_at_once() -> None:
    """The reader keeps a read in flight per connection: a request that arrives while one is in
    flight (it began before the request, so cannot vouch for it) gets a read sent at once on the
    other connection; one that arrives while both are busy joins the next read, sent as soon as a
    connection comes back; each gets a value read after it arrived."""
    sent: list[asyncio.Event] = []

    class Connection:
        closed = False

        async def read(self, slots: Any) -> dict[int, int]:
            sent.append(gate := asyncio.Event())
            number = len(sent)
            await gate.wait()
            return {-1: number, 0: number}

    async def connect() -> Connection:
        return Connection()

    def value(number: int) -> bytes:
        return epoch_module._reading({-1: number, 0: number}, 0) or b""

    async def settle() -> None:
        for _ in range(10):
            await asyncio.sleep(0)

    async def scenario() -> None:
        reader = epoch_module._Reader(asyncio.get_running_loop(), connect, connections=2)
        a = asyncio.create_task(reader.read(0))
        await settle()
        b = asyncio.create_task(reader.read(0))
        await settle()
        assert len(sent) == 2, "b did not wait for a's read to come back"
        c, d = asyncio.create_task(reader.read(0)), asyncio.create_task(reader.read(0))
        await settle()
        assert len(sent) == 2, "both connections busy: c and d wait for the next read together"
        sent[0].set()
        await settle()
        assert a.done() and a.result() == value(1) and not b.done()
        assert len(sent) == 3, "the freed connection sends c and d's read at once"
        sent[2].set()
        await settle()
        assert c.result() == d.result() == value(3) and not b.done()
        sent[1].set()
        await settle()
        assert b.result() == value(2)
        assert len(sent) == 3

    asyncio.run(scenario())


def _watched_write() -> Any:
    """An unscoped write to a table the caches read (matching no row): it moves every key."""
    return update(TaskRun).where(TaskRun.id == "tr_none").values(status="x")


def _organization() -> Organization:
    tag = uuid.uuid4().hex[:12]
    return Organization(id=f"org_{tag}", name=f"epoch {tag}", created_at=utcnow())


def _reader_pid(epoch: Any) -> int:
    """The backend of the epoch reader's first open connection (to terminate it)."""
    return _reader_pids(epoch)[0]


def _reader_pids(epoch: Any) -> list[int]:
    """The backends of every open connection of the epoch reader."""
    connections = epoch._reader._connections
    return [int(c.info.backend_pid) for c in connections if c is not None and not c.closed]


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


def _statements(server: Server) -> list[str]:
    """Every statement the server's engine runs from now on for a request: not the sweeper's,
    nor the event log writer's (it appends each request's event a moment later)."""
    seen: list[str] = []

    def noted(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.current_thread().name not in ("assay-sweeper", "assay-event-log"):
            seen.append(statement)

    engine = server.database.engine
    event.listen(engine, "before_cursor_execute", noted)
    _LISTENERS.append((engine, noted))  # removed after the test (`_forget_listeners`)
    return seen


_LISTENERS: list[tuple[Any, Any]] = []


@pytest.fixture(autouse=True)
def _forget_listeners() -> Any:
    yield
    while _LISTENERS:
        engine, noted = _LISTENERS.pop()
        event.remove(engine, "before_cursor_execute", noted)


def test_a_warm_search_takes_no_thread_and_every_change_is_seen_at_once(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    base = f"/v1/task-runs/{task_run_id}/fhir"
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        assert ok(agent.get(f"{base}/Patient", params={"family": "Epoch"}))["total"] == 0  # warms
        calls, statements = _counting(monkeypatch), _statements(server)
        assert ok(agent.get(f"{base}/Patient", params={"family": "Epoch"}))["total"] == 0
        assert ok(agent.get(f"{base}/metadata"))["resourceType"] == "CapabilityStatement"
        assert calls == [], "served from the worker's caches on the event loop"
        assert statements == [], "no SQL: no task run, no sandbox, no store row read"

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


def test_a_warm_read_is_answered_before_routing_exactly_as_the_routes_answer_it(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm run-token FHIR searches and reads skip FastAPI (`service/fast_path.py`) and answer —
    status, headers, body, and the event recorded — what the routes answer; whatever the fast
    path cannot answer (a 406, a write, history) reaches the routes as before."""
    from fastapi import FastAPI

    from assay.service import fast_path

    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    base = f"/v1/task-runs/{task_run_id}/fhir"
    routed: list[str] = []
    original = FastAPI.__call__

    async def counted(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            routed.append(scope["path"])
        await original(self, scope, receive, send)

    with server.client(run.token) as agent:
        playground_id = ok(agent.post(run.task_runs[0]["start_url"]))["playground_id"]
        patient = {"resourceType": "Patient", "name": [{"family": "Fast"}], "gender": "female"}
        patient_id = ok(agent.post(f"{base}/Patient", json=patient), 201)["id"]
        requests: list[tuple[str, dict[str, str], dict[str, str]]] = [
            (f"{base}/Patient", {"family": "Fast"}, {}),
            (f"{base}/Patient", {"family": "Fast", "_format": "json"}, {}),
            (f"{base}/Patient", {"_count": "1", "_sort": "-_lastUpdated"}, {"Prefer": "handling=lenient"}),
            (f"{base}/Patient", {"bogus-parameter": "1"}, {}),  # 400, an OperationOutcome
            (f"{base}/Patient/{patient_id}", {}, {}),
            (f"{base}/Patient/{patient_id}", {"_summary": "true"}, {}),
            (f"{base}/Patient/{patient_id}", {"_elements": "gender"}, {}),
            (f"{base}/Patient/no-such-patient", {}, {}),  # 404
            (f"{base}/Patient/{patient_id}", {"_summary": "bogus"}, {}),  # 400 (it was a 500)
            (f"{base}/Patient/{patient_id}/_history", {}, {}),  # the routes only
            (f"{base}/Patient", {}, {"Accept": "application/xml"}),  # 406 from the route
        ]
        agent.get(f"{base}/Patient")  # warms the index and the task run's rows
        monkeypatch.setattr(FastAPI, "__call__", counted)
        fast = [agent.get(path, params=params, headers=headers) for path, params, headers in requests]
        fast_routed = list(routed)

        async def declined(app: Any, scope: Any) -> None:
            return None

        monkeypatch.setattr(fast_path, "serve_cached", declined)
        slow = [agent.get(path, params=params, headers=headers) for path, params, headers in requests]
    # only the history and the 406 were routed
    assert fast_routed == [f"{base}/Patient/{patient_id}/_history", f"{base}/Patient"]
    for (path, params, _), one, other in zip(requests, fast, slow, strict=True):
        assert one.status_code == other.status_code, (path, params)
        assert one.content == other.content, (path, params)
        for header in ("content-type", "etag", "last-modified", "location"):
            assert one.headers.get(header) == other.headers.get(header), (path, params, header)
    assert [r.status_code for r in fast] == [200, 200, 200, 400, 200, 200, 200, 404, 400, 200, 406]
    sandboxes = ok(api.get(f"/playgrounds/{playground_id}"))["sandboxes"]
    [fhir] = [box for box in sandboxes if box["type"] == "fhir"]
    listed = ok(api.get(f"/sandboxes/{fhir['id']}/events", params={"limit": 100}))["data"]
    recorded = [(e["method"], e["path"], e["status"], e["response"]) for e in listed[-2 * len(requests) :]]
    assert recorded[: len(requests)] == recorded[len(requests) :], "the same events, fast or routed"
    assert [status for _, _, status, _ in recorded[: len(requests)]] == [r.status_code for r in fast]


def test_an_unexpected_error_in_the_fast_path_is_answered_by_the_routes(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the shortcut must not cost the agent its answer (nor the service a 500): nothing is
    recorded before the fast path's last step, so the routes answer the request as if it had
    declined, and log one event for it."""
    from assay.service import fast_path

    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient"))  # warm

        async def broken(app: Any, scope: Any) -> None:
            raise RuntimeError("a bug in the fast path")

        monkeypatch.setattr(fast_path, "serve_cached", broken)
        answer = agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient", params={"_count": "1"})
    assert answer.status_code == 200
    assert answer.json()["resourceType"] == "Bundle"


def test_complete_or_cancel_through_one_worker_is_seen_by_the_other_workers_next_request(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers (or instances: each app its own `Database`, caches and epoch) on one database,
    both warm: a `complete` through one, or a cancel through the other, is what the other's very
    next request sees (409) — never the rows it cached before; an expired token is a 401 at once."""
    done = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    cancelled = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    with serving(server) as second:
        for run in (done, cancelled):
            with server.client(run.token) as agent:
                ok(agent.post(run.task_runs[0]["start_url"]))
        with (
            server.client(done.token) as on_first,
            second.client(done.token) as on_second,
            server.client(cancelled.token) as cancelled_on_first,
            second.client(cancelled.token) as cancelled_on_second,
            second.client() as api_on_second,
        ):
            agents = (on_first, on_second, cancelled_on_first, cancelled_on_second)
            paths = [
                f"/v1/task-runs/{run.task_runs[0]['id']}/fhir/Patient"
                for run in (done, done, cancelled, cancelled)
            ]
            for agent, path in zip(agents, paths, strict=True):
                ok(agent.get(path))  # warms this worker's rows and index
            calls = _counting(monkeypatch)
            for agent, path in zip(agents, paths, strict=True):
                ok(agent.get(path))
            assert calls == [], "every worker answers from its caches"

            # A run token is revoked by its expiry, checked against the clock on every use.
            later = utcnow() + timedelta(days=3)
            with monkeypatch.context() as clock:
                clock.setattr(auth_cache, "utcnow", lambda: later)
                for agent, path in zip(agents, paths, strict=True):
                    expired = agent.get(path)  # the FHIR surface's OperationOutcome
                    assert expired.status_code == 401 and "run token expired" in expired.text

            ok(on_first.post(done.task_runs[0]["complete_url"]))
            refused = on_second.get(paths[1])
            assert refused.status_code == 409, refused.text
            ok(api_on_second.post(f"/task-runs/{cancelled.task_runs[0]['id']}/cancel"))
            refused = cancelled_on_first.get(paths[2])
            assert refused.status_code == 409, refused.text
            assert on_first.get(f"/v1/benchmark-runs/{done.id}/fhir/Patient").status_code == 409


@pytest.mark.postgres
def test_a_lost_epoch_connection_costs_a_sql_read_never_an_error(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: the worker's epoch reader loses its connections (a restart, a failover, a
    terminated backend). The next agent request is answered exactly: from SQL when the reader
    learns of the loss from its failed read (no epoch), or from the caches when it already saw
    the sockets close and reconnected (it watches them). The reader reconnects, and from then
    on requests are served from the caches again."""
    if server.backend != "postgres":
        pytest.skip("the SQLite epoch is a memory read")
    monkeypatch.setattr(epoch_module, "RETRY_AFTER", 0.0)
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    search = f"/v1/task-runs/{run.task_runs[0]['id']}/fhir/Patient"
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        warm = ok(agent.get(search))
        lost = _reader_pids(epoch_of(server.database.engine))
        assert lost
        with server.database.reading() as session:
            for pid in lost:
                session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        answered = agent.get(search)
        assert answered.status_code == 200, answered.text
        assert answered.json()["total"] == warm["total"]
        ok(agent.get(search))  # reconnected; the index is vouched for at this epoch again
        calls = _counting(monkeypatch)
        ok(agent.get(search))
        assert calls == [], "served from the caches again"
        assert not set(_reader_pids(epoch_of(server.database.engine))) & set(lost), "new connections"


def test_requests_that_meet_a_moved_epoch_together_catch_up_with_one_read_and_skip_the_routes(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After any commit (another run's `complete`, here an unrelated row) every cached row and
    index is stale. The concurrent warm requests that meet that share one read of the task run's
    rows and one catch-up of the FHIR index on a worker thread, and are all answered before
    routing — before, each one declined to the routes and read SQL on a thread of its own."""
    from fastapi import FastAPI

    from assay.sandboxes.fhir.index import StoreIndex
    from assay.sandboxes.fhir.store import EmbeddedFhir

    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    path = f"/v1/task-runs/{task_run_id}/fhir/Patient"
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        ok(agent.get(path))  # warm
    reads: list[str] = []
    catch_ups: list[str] = []
    original_read, original_catch_up = sandbox_actions.read_rows, EmbeddedFhir.catch_up

    def read_rows(*args: Any) -> list[Any]:
        reads.append("rows")
        return original_read(*args)

    def catch_up(self: EmbeddedFhir, store_id: str) -> None:
        catch_ups.append(store_id)
        original_catch_up(self, store_id)

    routed: list[str] = []
    original_call = FastAPI.__call__

    async def counted(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            routed.append(scope["path"])
        await original_call(self, scope, receive, send)

    handoffs: list[str] = []
    original_handoff = fast_path.run_in_threadpool
    in_handoff = threading.local()
    refreshed_in: list[str] = []  # the hand-off each SQL refresh of the index ran in
    original_refresh = StoreIndex.refresh

    async def handoff(func: Callable[..., Any], *args: Any) -> Any:
        handoffs.append(func.__name__)

        def marked() -> Any:
            in_handoff.name = func.__name__
            try:
                return func(*args)
            finally:
                in_handoff.name = None

        return await original_handoff(marked)

    def refresh(self: StoreIndex, *args: Any, **kwargs: Any) -> None:
        refreshed_in.append(getattr(in_handoff, "name", None) or "elsewhere")
        original_refresh(self, *args, **kwargs)

    monkeypatch.setattr(sandbox_actions, "read_rows", read_rows)
    monkeypatch.setattr(EmbeddedFhir, "catch_up", catch_up)
    monkeypatch.setattr(FastAPI, "__call__", counted)
    monkeypatch.setattr(fast_path, "run_in_threadpool", handoff)
    monkeypatch.setattr(StoreIndex, "refresh", refresh)
    with server.database.transaction() as session:  # an unscoped write moves every key's epoch
        session.execute(update(TaskRun).where(TaskRun.id == "tr_none").values(status="x"))

    async def together() -> list[httpx.Response]:
        headers = {"Authorization": f"Bearer {run.token}"}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as client:
            return await asyncio.gather(*(client.get(path, params={"_count": str(n)}) for n in range(1, 13)))

    answers = asyncio.run(together())
    assert [answer.status_code for answer in answers] == [200] * 12
    # Before, all 12 were routed and read the rows on 12 threads. (The shared test server's
    # sweeper may commit once more meanwhile: allow that one more read, and one late request.)
    assert len(routed) <= 1, routed
    assert 1 <= len(reads) <= 2, reads
    assert 1 <= len(catch_ups) <= 2, catch_ups
    # The hand-off that re-reads the rows brings the FHIR index current too (before, a second
    # hand-off followed for the index, one after the other). A request that meets the index's
    # lock held (by that hand-off, or a routed request's search) may still catch up on a hand-off
    # of its own, but finds the index current: the SQL refresh ran in the first.
    assert handoffs[0] == "load_and_catch_up", handoffs
    assert refreshed_in and refreshed_in[0] == "load_and_catch_up", (refreshed_in, handoffs)


def test_an_epoch_answer_that_comes_while_the_read_is_still_being_sent_is_not_lost() -> None:
    """The socket was backed up (`flush` not done at once), and the answer came while the read
    waited to finish sending it: the read still gets that answer."""
    first, second = socket.socketpair()

    class Result:
        status = 2  # TUPLES_OK
        ntuples = 1
        error_message = b""

        def get_value(self, row: int, column: int) -> bytes:
            return b"-1" if column == 0 else b"42"  # (the global slot, its value)

    class PgConn:
        def __init__(self) -> None:
            self.socket = first.fileno()
            self.flushes = 0
            self.results: list[Any] = []

        def send_query_prepared(self, name: bytes, params: Any) -> None:
            pass

        def flush(self) -> int:
            self.flushes += 1
            if self.flushes == 1:  # backed up: the answer arrives meanwhile
                self.results = [Result(), None]
                second.send(b"x")
                return 1
            return 0

        def consume_input(self) -> None:
            first.recv(16)

        def is_busy(self) -> bool:
            return False

        def get_result(self) -> Any:
            return self.results.pop(0) if self.results else None

        def finish(self) -> None:
            pass

    class Connection:
        pgconn = PgConn()

    async def scenario() -> dict[int, int]:
        connection = epoch_module._EpochConnection(Connection(), asyncio.get_running_loop())
        try:
            async with asyncio.timeout(5):
                return await connection.read([])
        finally:
            connection.drop()

    try:
        assert asyncio.run(scenario()) == {-1: 42}
    finally:
        first.close()
        second.close()
