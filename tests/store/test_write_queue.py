"""The SQLite write queue: every write transaction of a process, however begun, waits its turn in
arrival order instead of in SQLite's busy handler; PostgreSQL has none."""

from __future__ import annotations

import asyncio
import re
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
from assay.clients.demo.agent import (
    ELIGIBILITY_270,
    MLLP_END,
    MLLP_START,
    PRIOR_AUTH_REQUEST,
    adt_a08,
    sftp_session,
)
from assay.clients.demo.runner import _for_this_build
from assay.clients.packages import push, read_package
from assay.formats.hl7 import parse_message
from assay.store import Busy, Database, sqlite_url
from assay.store.database import write_turn
from assay.store.driver import DriverTransaction
from assay.store.write_queue import FairLock, queue_of
from tests.service.builders import make_benchmark, make_dataset, ok
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
    adt = "\r".join(adt_a08(credentials["hl7"]["receiving_facility"], control="H1"))
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
                endpoints["portal"] + "/prior_auth_requests", json=PRIOR_AUTH_REQUEST
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


# -- reads take no turn ----------------------------------------------------------------------------

READ_WAIT = 8.0
"""Seconds the reads get to be answered while another writer holds the turn: under `LOCK_WAIT`, so
a read that queued fails here rather than being answered 503 once it gave up."""

INBOX_ADT = (
    "MSH|^~\\&|REG|HOSP|AGENT|CLINIC|20260301120000||ADT^A04^ADT_A01|IN-READ|P|2.5.1\r"
    "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
)


def _hl7_inbox_run(server: Server, api: httpx.Client) -> tuple[str, str]:
    """(run token, inbox URL) of a started task run whose HL7 inbox `start` filled."""
    dataset = make_dataset(api, "hl7", {"inbox": [INBOX_ADT]})
    catalog = make_benchmark(api, [[]])
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"dataset_ids": [dataset["id"]]}))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(run["task_runs"][0]["start_url"]))
    return run["bearer_token"], started["endpoints"]["hl7_inbox"]


def _csrf(page: httpx.Response) -> str:
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None, page.text
    return found.group(1)


def _sftp_read(sftp: dict[str, Any], folder: str, path: str) -> tuple[list[str], bytes]:
    """A new SFTP login, then a folder's names and a file's bytes: reads only."""

    async def read() -> tuple[list[str], bytes]:
        async with sftp_session(sftp) as client:
            names = sorted(await client.listdir(folder))
            async with client.open(path, "rb") as source:
                return names, await source.read()

    return asyncio.run(read())


def test_surface_reads_take_no_write_turn_and_see_every_acknowledged_write(
    server: Server, api: httpx.Client, front_office: str
) -> None:
    """Writes through each surface are acknowledged first. Then, while another writer of the
    process holds its turn in the write queue, the reads that show them are all answered, each
    showing what was written: the portal's REST list and get, its web pages (the session, the
    request list and status page, the member look-up), the HL7 inbox (and an HTTP message for an
    unknown facility, refused without a transaction), the voice transcript and calls, and an SFTP
    login with a listing and a download, and the file over HTTP. Before, each of them but the
    files API began a write transaction (`BEGIN IMMEDIATE`) and waited behind the holder. On
    PostgreSQL there is no queue; the reads see the writes all the same (autocommit statements)."""
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        run = client.benchmark_runs.create(benchmark=front_office, agent={"name": "reads"})
        started = client.task_runs.start(run.task_runs[0].id, run_token=run.bearer_token)
    endpoints, credentials = started.endpoints, started.credentials
    inbox_token, inbox_url = _hl7_inbox_run(server, api)
    portal_web = server.url + credentials["portal"]["portal_url"]
    with ExitStack() as stack:
        agent = stack.enter_context(
            httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {run.bearer_token}"}, timeout=60
            )
        )
        inbox_agent = stack.enter_context(
            httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {inbox_token}"}, timeout=60)
        )
        browser = stack.enter_context(httpx.Client(base_url=portal_web, timeout=60))
        # The writes, each acknowledged before the turn is held.
        request_id = ok(
            agent.post(endpoints["portal"] + "/prior_auth_requests", json=PRIOR_AUTH_REQUEST), 201
        )["request_id"]
        fields = {
            "username": credentials["portal"]["username"],
            "password": credentials["portal"]["password"],
            "csrf_token": _csrf(browser.get("/login")),
        }
        assert browser.post("/login", data=fields).status_code == 303
        csrf = _csrf(browser.get("/members"))
        said = "Reads see what was acknowledged."
        ok(agent.post(endpoints["voice"] + "/turns", json={"speaker": "agent", "text": said}), 201)
        call_id = ok(
            agent.post(endpoints["voice"] + "/calls", json={"to": credentials["voice"]["phone_number"]}), 201
        )["call_id"]
        sftp = _Sftp(credentials["sftp"])
        stack.callback(sftp.close)
        sftp.write()  # outbox/queued/note.txt, through the gate

        wrong_facility = adt_for("ASSAY-NOBODY")
        reads: dict[str, Callable[[], Any]] = {
            "portal list": lambda: agent.get(endpoints["portal"] + "/prior_auth_requests"),
            "portal get": lambda: agent.get(endpoints["portal"] + f"/prior_auth_requests/{request_id}"),
            "web members": lambda: browser.get("/members"),
            "web list": lambda: browser.get("/prior-auth"),
            "web status": lambda: browser.get(f"/prior-auth/{request_id}"),
            "web look-up": lambda: browser.post(
                "/members", data={"member_id": "M123456", "birth_date": "1962-04-17", "csrf_token": csrf}
            ),
            "hl7 inbox": lambda: inbox_agent.get(inbox_url),
            "hl7 unroutable": lambda: agent.post(
                endpoints["hl7_outbound"],
                content=wrong_facility,
                headers={"Content-Type": "application/hl7-v2", "X-Assay-Route": "mllp"},
            ),
            "voice turns": lambda: agent.get(endpoints["voice"] + "/turns"),
            "voice calls": lambda: agent.get(endpoints["voice"] + "/calls"),
            "voice call": lambda: agent.get(endpoints["voice"] + f"/calls/{call_id}"),
            "sftp": lambda: _sftp_read(credentials["sftp"], "outbox/queued", "outbox/queued/note.txt"),
            "files get": lambda: agent.get(endpoints["files"] + "/outbox/queued/note.txt"),
        }
        with ThreadPoolExecutor(len(reads)) as pool:
            with write_turn(server.database.engine):
                sent = {name: pool.submit(read) for name, read in reads.items()}
                deadline = time.monotonic() + READ_WAIT
                while not all(future.done() for future in sent.values()) and time.monotonic() < deadline:
                    time.sleep(0.02)
                waiting = sorted(name for name, future in sent.items() if not future.done())
            answers = {name: future.result(timeout=120) for name, future in sent.items()}
    assert waiting == [], f"waited for the write turn: {waiting}"
    assert request_id in [row["request_id"] for row in ok(answers["portal list"])["data"]]
    assert ok(answers["portal get"])["procedure_code"] == "93306"
    assert answers["web members"].status_code == 200
    assert request_id in _ok_page(answers["web list"])
    assert "93306" in _ok_page(answers["web status"])
    assert "M123456" in _ok_page(answers["web look-up"])
    assert [parse_message(m["message"]).control_id.value for m in ok(answers["hl7 inbox"])["data"]] == [
        "IN-READ"
    ]
    assert b"MSA|AR" in answers["hl7 unroutable"].content
    assert said in [turn["text"] for turn in ok(answers["voice turns"])["data"]]
    assert call_id in [call["call_id"] for call in ok(answers["voice calls"])["data"]]
    assert ok(answers["voice call"])["call_id"] == call_id
    names, content = answers["sftp"]
    assert "note.txt" in names and content == b"written while the turn was held\n"
    assert answers["files get"].content == content


def _ok_page(page: httpx.Response) -> str:
    assert page.status_code == 200, page.text
    return page.text


def adt_for(facility: str) -> str:
    return "\r".join(
        [
            f"MSH|^~\\&|FRONTDESK|CLINIC|LAB|{facility}|20261126090000||ADT^A08|R1|P|2.5.1",
            "EVN|A08|20261126090000",
            "PID|1||M123456^^^ACME^MB||SMITH^JOHN||19620417|M|||||555-0142",
        ]
    )


def test_an_x12_exchange_takes_one_turn_its_payer_read_none(
    server: Server, front_office: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payer behind a task run's X12 requests is read (once per worker) on the read engine:
    the exchange's own transaction is its one turn in the write queue. Before, the first request
    queued twice, for the read and then for the exchange."""
    queue = queue_of(server.database.engine)
    if queue is None:
        pytest.skip("PostgreSQL has no write queue")
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        run = client.benchmark_runs.create(benchmark=front_office, agent={"name": "x12 turns"})
        started = client.task_runs.start(run.task_runs[0].id, run_token=run.bearer_token)
    turns: list[str] = []
    acquire = queue.acquire

    def acquire_noting_who(timeout: float) -> bool:
        turns.append(threading.current_thread().name)
        return acquire(timeout)

    with server.client(run.bearer_token) as agent:
        monkeypatch.setattr(queue, "acquire", acquire_noting_who)
        answer = agent.post(
            started.endpoints["x12"] + "/270",
            content=ELIGIBILITY_270,
            headers={"Content-Type": "application/edi-x12"},
        )
        monkeypatch.undo()
    assert answer.status_code == 200, answer.text
    # The server's own threads (the sweeper, the event log) may take turns meanwhile.
    assert len([name for name in turns if not name.startswith("assay-")]) == 1, turns
