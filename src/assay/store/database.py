"""Engine, sessions, migrations: one `Database` per app instance (no module-level engine).

Embedded default: SQLite in the data directory, WAL mode. On SQLite every transaction starts with
`BEGIN IMMEDIATE` and, inside one process, behind one arrival-order queue, however it was begun
(`store/write_queue.py`): SQLite has one writer at a time anyway,
and taking the write lock up front means a transaction never fails half-way on an upgrade from
reader to writer (SQLITE_BUSY_SNAPSHOT) — the SQLite equivalent of the row locks PostgreSQL gets
from `SELECT … FOR UPDATE`. Several processes on one SQLite file wait on `busy_timeout`.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from assay.store.epoch import Epoch, epoch_of, track, with_options
from assay.store.epoch_postgres import PostgresEpoch
from assay.store.json_values import serialize_json
from assay.store.write_queue import LOCK_WAIT, FairLock, end_turn, queue_writes, take_turn, write_turn

__all__ = [
    "LOCK_WAIT",
    "POOL_WAIT",
    "Database",
    "FairLock",
    "pipelined",
    "read_only",
    "sqlite_url",
    "write_turn",
]

_MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_KEY = 0x4153_5341  # "ASSA": one advisory lock id for schema upgrades
_POOL_SIZE = 10
_POOL_OVERFLOW = 32
"""With the pool's 10, one more connection than AnyIO's 40 worker threads plus the sweeper can
use at once, so a request only waits for a connection when something else holds one too long."""
_READ_ONLY = "assay_read_only"
POOL_WAIT = 10.0
"""Seconds a PostgreSQL unit of work waits for a pooled connection before SQLAlchemy's
`TimeoutError` (503 as well, in `service/errors.py`)."""
CONNECT_WAIT = 5
"""Seconds a new PostgreSQL connection may take to open (libpq's `connect_timeout`, unless the
URL sets its own): past it the request is answered as an outage, 503."""


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'assay.db').resolve()}"


class ReadOnlyViolation(RuntimeError):
    """A statement other than a read in a `read_only` unit of work (a bug, never the caller's input)."""


def read_only(engine: Engine) -> Engine:
    """`engine` (same pool) for units of work that only read: on SQLite their transactions start
    with a plain `BEGIN` — a WAL snapshot that neither takes nor waits for the write lock.

    On PostgreSQL their statements run in autocommit: at READ COMMITTED each statement reads its
    own snapshot inside a transaction too, so nothing a reader sees changes, and the `BEGIN` and
    `ROLLBACK` around it were two round trips of three for a token lookup (every API
    request with a key, and a `complete` on a worker new to the run)."""
    if engine.dialect.name == "postgresql":
        return with_options(engine, **{_READ_ONLY: True}, isolation_level="AUTOCOMMIT")
    return with_options(engine, **{_READ_ONLY: True})


@contextmanager
def pipelined(session: Session) -> Iterator[None]:
    """Writes whose answers nobody reads, sent together: on PostgreSQL psycopg's pipeline mode
    sends each statement as it is executed and waits for the answers once, at the end of the
    block (one round trip instead of one per statement: under agent load each round trip
    of `complete` was a wait for the busy machine to schedule PostgreSQL, then this thread). An
    error surfaces by the end of the block and the unit of work rolls back, as it would have.

    A statement that may return rows (a SELECT, anything with RETURNING) is answered at once:
    the pipeline is synced right after it, so reads inside the block (a surface's teardown hook)
    see their rows. An INSERT/UPDATE/DELETE's `rowcount` is unknown until the end, but the ORM's
    flush checks an UPDATE's or DELETE's: one a flush issues is answered at once too (with
    everything queued before it). The block turns autoflush off.
    SQLite runs the statements one by one; they are in-process calls there anyway."""
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        yield
        return
    driver = connection.connection.driver_connection
    flushing = [False]

    def flush_began(*_args: Any) -> None:
        flushing[0] = True

    def flush_ended(*_args: Any) -> None:
        flushing[0] = False

    with session.no_autoflush, driver.pipeline() as pipeline:  # type: ignore[union-attr]

        def answer_reads(
            _conn: Any, _cursor: Any, _statement: Any, _params: Any, context: Any, _many: Any
        ) -> None:
            compiled = context.compiled
            writes_only = (context.isinsert or context.isupdate or context.isdelete) and not (
                compiled is not None and compiled.effective_returning
            )
            if not writes_only or (flushing[0] and not context.isinsert):
                pipeline.sync()

        event.listen(connection, "after_cursor_execute", answer_reads)
        event.listen(session, "before_flush", flush_began)
        event.listen(session, "after_flush", flush_ended)
        try:
            yield
        finally:
            event.remove(connection, "after_cursor_execute", answer_reads)
            event.remove(session, "before_flush", flush_began)
            event.remove(session, "after_flush", flush_ended)


def _check_idle_connection(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A pooled PostgreSQL connection the server closed is not handed out: the pool replaces it.

    A server that restarts or shuts down (`pg_ctl restart`, a failover) ends every connection with
    an error message and a close, which an idle connection's socket shows as readable; no answer
    is due on an idle connection, so a readable one is gone (or about to be). A `poll` with no
    wait costs no round trip, where SQLAlchemy's `pool_pre_ping` sends a query on every checkout.
    Without it the first unit of work after a restart on each pooled connection failed (the first
    SFTP login of a run refused, API requests answered 500)."""
    if getattr(dbapi_connection, "closed", False):
        raise DisconnectionError("the pooled connection is closed")
    try:
        descriptor = dbapi_connection.pgconn.socket
    except Exception as exc:  # no socket: closed underneath
        raise DisconnectionError("the pooled connection has no socket") from exc
    poller = select.poll()
    poller.register(descriptor, select.POLLIN | select.POLLERR | select.POLLHUP)
    if poller.poll(0):
        raise DisconnectionError("the server closed the pooled connection (restart or shutdown)")


class Database:
    """A SQLAlchemy engine plus the transaction discipline of its backend."""

    def __init__(self, url: str | URL):
        self.url = make_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.engine = self._create_engine()
        self.read_engine = read_only(self.engine)
        """The same pool; on SQLite its transactions start with a plain `BEGIN` (see `reading`)."""
        self.sessions = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        self._readers = sessionmaker(self.read_engine, expire_on_commit=False, autoflush=False)

    def _create_engine(self) -> Engine:
        if not self.is_sqlite:
            engine = create_engine(
                self.url,
                pool_size=_POOL_SIZE,
                max_overflow=_POOL_OVERFLOW,
                pool_timeout=POOL_WAIT,
                pool_recycle=1800,
                json_serializer=serialize_json,
                # A host that drops packets would otherwise hold a connect (and the request behind
                # it) for the kernel's TCP timeout, about two minutes, before the 503 an outage is.
                connect_args={} if "connect_timeout" in self.url.query else {"connect_timeout": CONNECT_WAIT},
            )
            # The change epoch in the database itself, shared by instances on any machine.
            track(engine, PostgresEpoch(engine))
            event.listen(engine, "checkout", _check_idle_connection)

            @event.listens_for(engine, "before_cursor_execute")
            def _reads_only(connection: Any, _c: Any, statement: str, _p: Any, _x: Any, _m: bool) -> None:
                # A reading unit of work runs in autocommit here (`read_only`): a write would
                # commit at once instead of being rolled back with the rest, so none may run.
                if connection.get_execution_options().get(_READ_ONLY):
                    verb = statement.lstrip()[:6].upper()
                    if not verb.startswith(("SELECT", "SHOW")):
                        raise ReadOnlyViolation(f"a write in a reading unit of work: {statement[:60]!r}")

            return engine
        if self.url.database:
            Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            self.url,
            connect_args={"check_same_thread": False, "timeout": LOCK_WAIT},
            pool_size=_POOL_SIZE,
            max_overflow=_POOL_OVERFLOW,
            pool_timeout=POOL_WAIT,
            json_serializer=serialize_json,
        )
        # An INSERT of many rows (the event log's batches, a verification's criterion runs) goes
        # out as one multi-row VALUES statement instead of one `sqlite3_step` per row: each step
        # releases the GIL, and under load every re-take waited for the event loop's switch
        # interval — a batch of 100 events took ~0.5 s.
        engine.dialect.use_insertmanyvalues_wo_returning = True

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT * 1000)}")
            cursor.close()

        queue = queue_writes(engine)

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            if connection.get_execution_options().get(_READ_ONLY):
                connection.exec_driver_sql("BEGIN")
                return
            pooled = connection.connection
            take_turn(pooled, queue)  # this process's writers in arrival order (store/write_queue.py)
            try:
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            except BaseException:
                end_turn(pooled)
                raise

        # The change epoch the agent path's caches check (`store/epoch.py`): a file beside the
        # database, shared by every worker on it; only this process for a database in memory.
        on_disk = self.url.database not in (None, "", ":memory:") and "mode=memory" not in str(self.url)
        track(engine, Epoch(Path(f"{self.url.database}-epoch") if on_disk else None))
        return engine

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One unit of work: commit on success, roll back on error (one commit per request).

        Run it whole on one thread: on SQLite, from its first statement to its commit, it holds
        this process's turn at the write lock (`store/write_queue.py`).
        """
        session = self.sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A unit of work that only reads: no write lock, and on SQLite a plain `BEGIN`, so it
        reads a consistent WAL snapshot while writers go on. On PostgreSQL its statements run in
        autocommit (`read_only`), and anything but a read raises `ReadOnlyViolation`."""
        session = self._readers()
        try:
            yield session
        finally:
            session.close()

    def migrate(self) -> None:
        """Upgrade the schema to every head; safe when several workers start at once."""
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        with self.engine.begin() as connection:
            if not self.is_sqlite:
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
            config.attributes["connection"] = connection
            command.upgrade(config, "heads")  # surfaces add migrations side by side (architecture.md)

    def dispose(self) -> None:
        epoch = epoch_of(self.engine)
        if epoch.remote:  # its reader's connection (SQLite's map stays: caches may still ask it)
            epoch.close()
        self.engine.dispose()
