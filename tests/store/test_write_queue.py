"""The SQLite write queue: every write transaction of a process, however begun, waits its turn in
arrival order instead of in SQLite's busy handler; PostgreSQL has none."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncssh
import httpx
import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, text
from sqlalchemy.exc import OperationalError

from assay.client import Assay
from assay.clients.demo import PACKAGE
from assay.clients.demo.agent import ELIGIBILITY_270, MLLP_END, MLLP_START
from assay.clients.demo.runner import _for_this_build
from assay.clients.packages import push, read_package
from assay.store import Busy, Database, sqlite_url
from assay.store.database import write_turn
from assay.store.driver import DriverTransaction
from assay.store.write_queue import FairLock, queue_of
from tests.service.conftest import Server

_metadata = MetaData()
_SEEN = Table("seen", _metadata, Column("id", Integer, primary_key=True), Column("who", String))

IN_LINE_WAIT = 30.0
"""Seconds a test waits for a thread to reach the queue (bounded: a thread that never gets there
fails the test instead of hanging it)."""


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(sqlite_url(tmp_path))
    _metadata.create_all(db.engine)
    try:
        yield db
    finally:
        db.dispose()


def _in_line(queue: FairLock, count: int) -> None:
    deadline = time.monotonic() + IN_LINE_WAIT
    while queue.waiting < count:
        assert time.monotonic() < deadline, f"{queue.waiting} of {count} writers in line"
        time.sleep(0.002)


def _writers(database: Database) -> dict[str, Callable[[str], None]]:
    """One write transaction per way of beginning one on the process's engine."""
    engine = database.engine

    def session(who: str) -> None:
        with database.transaction() as s:
            s.execute(insert(_SEEN).values(who=who))

    def begin(who: str) -> None:
        with engine.begin() as conn:
            conn.execute(insert(_SEEN).values(who=who))

    def autobegin(who: str) -> None:
        with engine.connect() as conn:
            conn.execute(insert(_SEEN).values(who=who))
            conn.commit()

    def driver(who: str) -> None:
        with DriverTransaction(engine) as tx:
            tx.execute(insert(_SEEN), [{"who": who}])

    return {"session": session, "begin": begin, "autobegin": autobegin, "driver": driver}


def _committed(database: Database) -> list[str]:
    with database.reading() as s:
        return list(s.scalars(select(_SEEN.c.who).order_by(_SEEN.c.id)))


def test_writers_of_every_kind_take_the_write_lock_in_arrival_order(database: Database) -> None:
    """A holder's transaction is open; then writers arrive one by one — an `engine.begin()`, a
    connection's autobegin and a `DriverTransaction` (how the surfaces write) and a session of
    `Database.transaction` (how `start` and `complete` write) — and commit in the order they
    arrived. Before, all but the session waited in SQLite's busy handler, and the session, woken
    the moment the holder committed, went first."""
    queue = queue_of(database.engine)
    assert queue is not None
    kinds = ["begin", "autobegin", "driver", "session", "begin", "driver", "autobegin", "session"]
    writers = _writers(database)
    with ThreadPoolExecutor(len(kinds)) as pool:
        with database.transaction() as holder:
            holder.execute(insert(_SEEN).values(who="holder"))
            done: list[Future[None]] = []
            for i, kind in enumerate(kinds):
                done.append(pool.submit(writers[kind], f"{i} {kind}"))
                _in_line(queue, i + 1)
        for future in done:
            future.result(timeout=IN_LINE_WAIT)
    assert _committed(database) == ["holder", *(f"{i} {kind}" for i, kind in enumerate(kinds))]
    assert queue.waiting == 0


def test_a_transaction_begun_inside_a_held_turn_goes_on(database: Database) -> None:
    """A thread holding its turn (`write_turn` across several transactions, a session whose first
    statement has not run yet) that begins another transaction is not queued behind itself;
    other threads still wait for the outer turn to end."""
    queue = queue_of(database.engine)
    assert queue is not None
    outsider: Future[None]
    with ThreadPoolExecutor(1) as pool:
        with write_turn(database.engine):
            with database.engine.begin() as conn:
                conn.execute(insert(_SEEN).values(who="first"))
            outsider = pool.submit(_writers(database)["begin"], "outsider")
            _in_line(queue, 1)
            with database.transaction() as session:
                with DriverTransaction(database.engine) as tx:  # the session has not begun: no lock held
                    tx.execute(insert(_SEEN), [{"who": "nested"}])
                session.execute(insert(_SEEN).values(who="session"))
            assert not outsider.done()
        outsider.result(timeout=IN_LINE_WAIT)
    assert _committed(database) == ["first", "nested", "session", "outsider"]


def test_a_turn_is_given_back_however_the_transaction_ends(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rolled back by an error, refused by SQL, timed out in line, or its connection invalidated:
    the next writer gets the lock at once, and a writer that waited past `LOCK_WAIT` is `Busy`."""
    queue = queue_of(database.engine)
    assert queue is not None
    engine = database.engine
    with pytest.raises(ZeroDivisionError), engine.begin() as conn:
        conn.execute(insert(_SEEN).values(who="rolled back"))
        raise ZeroDivisionError
    with pytest.raises(OperationalError), engine.begin() as conn:
        conn.execute(insert(_SEEN).values(who="refused"))
        conn.execute(text("INSERT INTO no_such_table VALUES (1)"))
    with pytest.raises(ZeroDivisionError), DriverTransaction(engine) as tx:
        tx.execute(insert(_SEEN), [{"who": "rolled back too"}])
        raise ZeroDivisionError
    with engine.connect() as conn:
        conn.execute(insert(_SEEN).values(who="invalidated"))
        conn.invalidate()
    monkeypatch.setattr("assay.store.write_queue.LOCK_WAIT", 0.2)
    with ThreadPoolExecutor(1) as pool, database.transaction() as holder:
        holder.execute(insert(_SEEN).values(who="holder"))
        late = pool.submit(_writers(database)["driver"], "late")
        with pytest.raises(Busy):
            late.result(timeout=IN_LINE_WAIT)
    assert queue.waiting == 0
    _writers(database)["session"]("after")  # `Busy` after 0.2 s had any of them kept its turn
    assert _committed(database) == ["holder", "after"]


def test_many_writers_of_every_kind_at_once_never_see_a_locked_database(database: Database) -> None:
    """Sixteen threads, each writing in every way in turn: every transaction commits, none is
    refused with `database is locked` (SQLite's busy timeout) or `Busy`."""
    writers = list(_writers(database).values())
    rounds = 12

    def work(thread: int) -> None:
        for i in range(rounds):
            writers[(thread + i) % len(writers)](f"{thread}.{i}")

    with ThreadPoolExecutor(16) as pool:
        for future in [pool.submit(work, thread) for thread in range(16)]:
            future.result(timeout=120)
    assert len(_committed(database)) == 16 * rounds


# -- through the surfaces ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def front_office(server: Server) -> Iterator[str]:
    """The demo's benchmark (every surface), under a name of this module's own: `slug@version`."""
    package, _ = _for_this_build(read_package(PACKAGE))
    package = replace(
        package, name=f"Write queue {uuid.uuid4().hex[:8]}", benchmark={**package.benchmark, "concurrency": 3}
    )
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        version = client.benchmarks.publish(push(client, package).benchmark_id)
    yield f"{version.slug}@{version.version}"


HELD_FOR = 3.0
"""Seconds the test holds the process's turn while the writes are sent: none may be answered in
that time on SQLite (before, each but the voice turns went straight to SQLite's lock and was)."""


def _mllp(host: str, port: int, facility: str) -> Callable[[], bytes]:
    message = "\r".join(
        [
            f"MSH|^~\\&|FRONTDESK|CLINIC|LAB|{facility}|20261126090000||ADT^A08|Q{time.monotonic_ns()}|P|2.5.1",
            "EVN|A08|20261126090000",
            "PID|1||M123456^^^ACME^MB||SMITH^JOHN||19620417|M|||||555-0142",
        ]
    )
    conn = socket.create_connection((host, port), timeout=60)  # connected before the turn is held

    def send() -> bytes:
        with conn:
            conn.sendall(MLLP_START + message.encode() + MLLP_END)
            reply = b""
            while not reply.endswith(MLLP_END):
                chunk = conn.recv(65536)
                assert chunk, "MLLP connection closed before the ACK"
                reply += chunk
        return reply

    return send


class _Sftp:
    """An SFTP session logged in before the turn is held; `write` is the gated change."""

    def __init__(self, sftp: dict[str, Any]):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.conn, self.client = self._run(self._open(sftp))

    def _run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=60)

    @staticmethod
    async def _open(sftp: dict[str, Any]) -> Any:
        conn = await asyncssh.connect(
            sftp["host"],
            port=int(sftp["port"]),
            username=sftp["username"],
            password=sftp["password"],
            known_hosts=None,
        )
        client = await conn.start_sftp_client()
        await client.makedirs("outbox/queued", exist_ok=True)
        return conn, client

    def write(self) -> None:
        async def put() -> None:
            async with self.client.open("outbox/queued/note.txt", "wb") as target:
                await target.write(b"written while the turn was held\n")

        self._run(put())

    def close(self) -> None:
        async def close() -> None:
            self.client.exit()
            self.conn.close()
            await self.conn.wait_closed()

        self._run(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


def test_every_surface_write_and_the_lifecycle_wait_their_turn_in_the_process_queue(
    server: Server, front_office: str
) -> None:
    """While another writer of the process holds its turn, a FHIR create, an X12 270, HL7 over
    HTTP and over MLLP, a files upload over HTTP and over SFTP, a portal request, voice turns,
    a `start` and a `complete` all wait (on SQLite) — none is answered — and once the turn is
    given back every one succeeds. On PostgreSQL there is no queue: none of them waits."""
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        run = client.benchmark_runs.create(benchmark=front_office, agent={"name": "write queue"})
        worked, to_complete, to_start = (task_run.id for task_run in run.task_runs[:3])
        started = client.task_runs.start(worked, run_token=run.bearer_token)
        client.task_runs.start(to_complete, run_token=run.bearer_token)
    endpoints, credentials = started.endpoints, started.credentials
    agent = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {run.bearer_token}"}, timeout=60
    )
    appointment = {"resourceType": "Appointment", "status": "booked", "participant": [{"status": "accepted"}]}
    adt = "\r".join(
        [
            f"MSH|^~\\&|FRONTDESK|CLINIC|LAB|{credentials['hl7']['receiving_facility']}|20261126090000||ADT^A08|H1|P|2.5.1",
            "EVN|A08|20261126090000",
            "PID|1||M123456^^^ACME^MB||SMITH^JOHN||19620417|M|||||555-0142",
        ]
    )
    prior_auth = {
        "patient": {"member_id": "M123456", "name": "John Smith", "birth_date": "1962-04-17"},
        "provider": {"npi": "1234567893", "name": "Front Office Clinic"},
        "procedure_code": "93306",
        "diagnosis_codes": ["R07.89"],
        "service_date": "2026-12-10",
    }
    with ExitStack() as stack:
        stack.enter_context(agent)
        sftp = _Sftp(credentials["sftp"])
        stack.callback(sftp.close)
        mllp = _mllp(
            credentials["hl7"]["host"],
            int(credentials["hl7"]["port"]),
            credentials["hl7"]["receiving_facility"],
        )
        writes: dict[str, Callable[[], Any]] = {
            "fhir create": lambda: agent.post(
                endpoints["fhir"] + "/Appointment",
                json=appointment,
                headers={"Content-Type": "application/fhir+json"},
            ),
            "x12 270": lambda: agent.post(
                endpoints["x12"] + "/270",
                content=ELIGIBILITY_270,
                headers={"Content-Type": "application/edi-x12"},
            ),
            "hl7 http": lambda: agent.post(
                endpoints["hl7_outbound"], content=adt, headers={"Content-Type": "application/hl7-v2"}
            ),
            "hl7 mllp": mllp,
            "files put": lambda: agent.put(
                endpoints["files"] + "/outbox/notes/queued.txt", content=b"queued\n"
            ),
            "sftp write": sftp.write,
            "portal request": lambda: agent.post(
                endpoints["portal"] + "/prior_auth_requests", json=prior_auth
            ),
            "voice turns": lambda: agent.post(
                endpoints["voice"] + "/turns", json=[{"speaker": "agent", "text": "Hi."}]
            ),
            "start": lambda: agent.post(f"/v1/task-runs/{to_start}/start"),
            "complete": lambda: agent.post(f"/v1/task-runs/{to_complete}/complete"),
        }
        with ThreadPoolExecutor(len(writes)) as pool:
            with write_turn(server.database.engine):
                sent = {name: pool.submit(write) for name, write in writes.items()}
                time.sleep(HELD_FOR)
                answered = sorted(name for name, future in sent.items() if future.done())
            results = {name: future.result(timeout=120) for name, future in sent.items()}
    if server.backend == "sqlite":
        assert answered == []
    else:
        assert answered == sorted(writes)
    for name, result in results.items():
        if isinstance(result, httpx.Response):
            assert result.status_code < 300, (name, result.status_code, result.text)
        elif isinstance(result, bytes):
            assert b"MSA|AA" in result, (name, result)
