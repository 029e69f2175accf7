"""The change epoch: "has anything the agent path caches changed since I read it?" without SQL.

The agent path keeps, per worker, what a request needs beyond its run token: the task run's state
and sandbox (`service/sandboxes/routes.py`) and how far a FHIR store's index is current
(`sandboxes/fhir/store.py`). Both go stale the moment any worker commits a change to those rows
(a `complete`, a cancel, the sweeper's timeout, a FHIR write). So (issue 9):

- **Every committed write bumps the epoch.** `track` watches each connection of the engine: a
  statement that writes (INSERT/UPDATE/DELETE, DDL, anything that is not a read) to a table other
  than `QUIET_TABLES` marks the connection, and when the connection goes back to the pool — after
  its commit or rollback, before the request that wrote answers — the epoch is bumped. No call
  site has to remember to invalidate anything; the sweeper and the CLI are covered too.
- **A cached entry is used only while the epoch is the one read before it was loaded.** Readers
  read the epoch first, then SQL: a change committed in between bumps the epoch after the read,
  so the entry is stale at once and reloaded on its next use. Never the other way round.
- **Where it lives.** SQLite file: 16 bytes in a file beside the database (`assay.db-epoch`),
  mapped into the memory of every process that opens the database through `Database`; a bump
  writes 16 random bytes, a check is a 16-byte memory read (workers of one `assay serve` share
  the file, as they share the database file). SQLite in memory: this process only (nobody else
  can open it). PostgreSQL (`PostgresEpoch`): the sequence `assay_change_epoch` in the database
  itself, so instances on several machines share it. A bump is a `nextval` on the connection
  that wrote, after its commit (non-transactional: writers never wait for each other on it);
  reading costs a round trip, so it is read once per agent request, on the event loop, before
  anything is loaded (`snapshot`, called by `AssayApp` for the surface paths), and `current()`
  answers that request's snapshot — None outside such a request, or once this process wrote
  since, so whatever is not an agent request reads SQL as before. A failed read is a None
  snapshot: the request reads SQL, it does not fail.

The event log (`sandbox_events`, one insert per agent request), the tool calls' trajectory
(`trajectory_steps`, a batch every few agent requests) and the sweeper's lease are
`QUIET_TABLES`: the caches read none of them, and bumping on each would make them useless.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import os
import threading
import time
import weakref
from contextlib import suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

__all__ = [
    "QUIET_TABLES",
    "SEQUENCE",
    "ChangeEpoch",
    "Epoch",
    "PostgresEpoch",
    "epoch_of",
    "track",
    "with_options",
]

QUIET_TABLES = frozenset({"sandbox_events", "trajectory_steps", "leases"})
"""Tables whose writes do not bump the epoch: nothing cached reads them."""

SEQUENCE = "assay_change_epoch"
"""PostgreSQL's epoch (migration `0009_change_epoch`)."""

_SIZE = 16
_DIRTY = "assay_epoch_dirty"
_READS = ("SELECT", "BEGIN", "PRAGMA", "SAVEPO", "RELEAS", "ROLLBA", "COMMIT", "SHOW")
_LOG = logging.getLogger(__name__)


class ChangeEpoch:
    """What the caches ask: `current()` — bytes that change whenever a tracked write commits, or
    None when nothing may be cached."""

    remote = False
    """True when reading it costs a round trip: `snapshot` it once per agent request first."""

    def current(self) -> bytes | None:
        return None

    async def snapshot(self) -> None:
        """Read the epoch for the rest of this request (`PostgresEpoch`); nothing for the others."""

    def bump(self, dbapi_connection: Any = None) -> None:
        """A tracked write committed (on `dbapi_connection`, back in the pool, when known)."""

    async def aclose(self) -> None:
        """Close what `snapshot` opened on the running event loop."""

    def close(self) -> None:
        pass


class Epoch(ChangeEpoch):
    """16 bytes in memory (a file mapped by every process on one SQLite file, or this process's
    own); None from `current` when disabled."""

    def __init__(self, path: Path | None = None, *, enabled: bool = True):
        self.enabled = enabled
        self._lock = threading.Lock()
        self._map: mmap.mmap | bytearray
        if path is None:
            self._map = bytearray(os.urandom(_SIZE))
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < _SIZE:
                os.ftruncate(fd, _SIZE)  # two workers racing here both leave 16 zero bytes
            self._map = mmap.mmap(fd, _SIZE)
        finally:
            os.close(fd)

    def current(self) -> bytes | None:
        """The epoch now, or None when there is none (nothing may be cached)."""
        return bytes(self._map[:_SIZE]) if self.enabled else None

    def bump(self, dbapi_connection: Any = None) -> None:
        with self._lock:
            self._map[:_SIZE] = os.urandom(_SIZE)

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()


_SNAPSHOT: ContextVar[tuple[PostgresEpoch, bytes, int] | None] = ContextVar("assay_epoch", default=None)
"""(epoch, its value read at the start of this request, that process's write count then)."""

READ_WAIT = 2.0
"""Seconds a read of PostgreSQL's epoch may take (connecting included) before the request goes
on without it (reading SQL, as with no epoch)."""
RETRY_AFTER = 1.0
"""Seconds after a failed read before the next attempt to reconnect: meanwhile, no snapshot."""
CONNECTIONS = 2
"""Epoch reads one worker may have in flight at once (`_Reader`), each on a connection of its own."""

_READ = f"SELECT last_value FROM {SEQUENCE}"
_PREPARED = "assay_epoch_read"
_TUPLES_OK = 2  # psycopg.pq.ExecStatus.TUPLES_OK, without importing psycopg where it is absent
_BUMP = f"SELECT nextval('{SEQUENCE}')"


class PostgresEpoch(ChangeEpoch):
    """The sequence `assay_change_epoch`: bumped after each tracked commit, read once per agent
    request on the event loop (module docstring)."""

    remote = True

    def __init__(self, engine: Engine):
        args, params = engine.dialect.create_connect_args(engine.url)
        params.pop("context", None)  # the dialect's adapters: nothing we read needs them
        params.setdefault("connect_timeout", max(2, int(READ_WAIT)))
        self._args, self._params = list(args), {**params, "application_name": "assay-epoch"}
        self._lock = threading.Lock()
        self._writes = 0
        """Tracked commits by this process: a snapshot older than one of them vouches for nothing."""
        self._reader: _Reader | None = None

    def current(self) -> bytes | None:
        found = _SNAPSHOT.get()
        if found is None or found[0] is not self or found[2] != self._writes:
            return None
        return found[1]

    async def snapshot(self) -> None:
        writes = self._writes  # before the read: a commit of ours after it voids the snapshot
        reader = self._reader
        loop = asyncio.get_running_loop()
        if reader is None or reader.loop is not loop:
            if reader is not None:
                reader.drop()
            reader = self._reader = _Reader(loop, self._connect)
        try:
            value = await reader.read()
        except Exception:  # never the request's failure: it reads SQL instead
            _LOG.exception("reading the change epoch failed")
            value = None
        _SNAPSHOT.set(None if value is None else (self, value, writes))

    async def _connect(self) -> _EpochConnection:
        return await _EpochConnection.open(self._args, self._params)

    def bump(self, dbapi_connection: Any = None) -> None:
        with self._lock:
            self._writes += 1
        if dbapi_connection is not None and _nextval(dbapi_connection):
            return
        # The connection that wrote is gone (invalidated) or failed just now: one of our own.
        try:
            connection = self._connect_sync()
            try:
                connection.execute(_BUMP)
            finally:
                connection.close()
        except Exception:
            _LOG.error(
                "could not move the change epoch after a commit: other processes may answer from "
                "what they cached before it until the next change",
                exc_info=True,
            )

    def _connect_sync(self) -> Any:
        import psycopg

        return psycopg.connect(*self._args, **self._params, autocommit=True)

    async def aclose(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.aclose()

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.drop()


def _nextval(connection: Any) -> bool:
    """`nextval` on a psycopg connection just back in the pool (its transaction already ended),
    in autocommit for one round trip; False when that failed."""
    try:
        import psycopg.pq

        if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            connection.rollback()
        autocommit = connection.autocommit
        connection.autocommit = True
        try:
            connection.execute(_BUMP)
        finally:
            connection.autocommit = autocommit
        return True
    except Exception:
        return False


class _Reader:
    """`CONNECTIONS` connections on one event loop, each with one read in flight. A request joins
    the next read that has not been sent yet, so each still sees every write answered before it
    began, whatever the number of concurrent requests; when no read is waiting to be sent, one is
    sent at once on a free connection instead of after the read in flight (which began before the
    request arrived, so cannot vouch for it) has come back. With one connection every request
    waited for up to two round trips, and under 16 clients on PostgreSQL with 2 workers each
    worker's event loop sat idle ~29% of the time with all its requests waiting on the epoch."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connect: Any, connections: int = 0):
        self.loop = loop
        self._connect = connect
        self._connections: list[Any] = [None] * (connections or CONNECTIONS)
        self._free = list(range(len(self._connections)))
        """Connections with no read in flight and no task serving them."""
        self._next: asyncio.Future[bytes | None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        """The serving tasks, held so the loop's weak references do not let them be collected."""
        self._retry_at = 0.0
        self._failing = False

    async def read(self) -> bytes | None:
        waiting = self._next
        if waiting is None:
            waiting = self._next = self.loop.create_future()
            if self._free:
                task = self.loop.create_task(self._serve(self._free.pop()))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        # Shielded: one caller cancelled (its client went away) must not cancel the others' read.
        return await asyncio.shield(waiting)

    async def _serve(self, slot: int) -> None:
        waiting: asyncio.Future[bytes | None] | None = None
        try:
            while self._next is not None:
                waiting, self._next = self._next, None
                value = await self._read_once(slot)
                if not waiting.done():
                    waiting.set_result(value)
        finally:
            self._free.append(slot)
            if waiting is not None and not waiting.done():  # cancelled (the loop is closing)
                waiting.set_result(None)
            if self._next is not None and len(self._free) == len(self._connections):
                # Nobody left to send it: no epoch for those requests (they read SQL).
                if not self._next.done():
                    self._next.set_result(None)
                self._next = None

    async def _read_once(self, slot: int) -> bytes | None:
        try:
            async with asyncio.timeout(READ_WAIT):
                connection = self._connections[slot]
                if connection is None or connection.closed:
                    if time.monotonic() < self._retry_at:
                        return None
                    connection = self._connections[slot] = await self._connect()
                    value = await connection.read()
                else:
                    try:
                        value = await connection.read()
                    except ConnectionError:
                        # A connection the server closed since its last read (a restart): one new
                        # connection, at once, rather than a second of requests without an epoch.
                        self._drop(slot)
                        connection = self._connections[slot] = await self._connect()
                        value = await connection.read()
        except Exception:  # lost, timed out, no sequence yet: this request reads SQL instead
            if not self._failing:
                _LOG.warning(
                    "reading the change epoch failed; serving from SQL until it works", exc_info=True
                )
            self._failing = True
            self._retry_at = time.monotonic() + RETRY_AFTER
            self._drop(slot)
            return None
        self._failing = False
        return value.to_bytes(8, "big", signed=True)

    def _drop(self, slot: int) -> None:
        connection, self._connections[slot] = self._connections[slot], None
        if connection is not None:
            connection.drop()

    def drop(self) -> None:
        """Close the connections at once, from any thread (a cancelled or failed read, another loop)."""
        for slot in range(len(self._connections)):
            self._drop(slot)

    async def aclose(self) -> None:
        connections, self._connections = self._connections, [None] * len(self._connections)
        for connection in connections:
            if connection is not None:
                connection.drop()


class _EpochConnection:
    """One autocommit connection reading the sequence through libpq directly (psycopg's `pq`
    layer): the statement prepared once, each read a `send_query_prepared` answered through a
    reader callback registered on the socket for the connection's life. Through psycopg's
    `AsyncConnection.execute` and `fetchone` a read cost the event loop about 100 us of Python
    (a cursor, generators, a reader registered and removed for each wait) — one read per two agent
    requests under load, so ~10% of a loaded worker's GIL time (session 10)."""

    def __init__(self, connection: Any, loop: asyncio.AbstractEventLoop):
        self._connection = connection  # psycopg's, for `info` and what it owns
        self._pg = connection.pgconn
        self._loop = loop
        self._fd = self._pg.socket
        self._waiting: asyncio.Future[int] | None = None
        self._value: int | None = None
        self._error: str | None = None
        self.closed = False
        loop.add_reader(self._fd, self._readable)

    @classmethod
    async def open(cls, args: list[Any], params: dict[str, Any]) -> _EpochConnection:
        import psycopg

        connection = await psycopg.AsyncConnection.connect(*args, **params, autocommit=True)
        try:
            await connection.execute(f"PREPARE {_PREPARED} AS {_READ}")
        except BaseException:
            await connection.close()
            raise
        return cls(connection, asyncio.get_running_loop())

    @property
    def info(self) -> Any:
        return self._connection.info

    async def read(self) -> int:
        """The sequence's `last_value`, read by a statement sent now."""
        if self.closed or self._waiting is not None:
            raise ConnectionError("the epoch connection is closed or busy")
        pg = self._pg
        self._value = self._error = None
        # Waited for before it is sent: the answer may come while the flush below waits.
        waiting = self._waiting = self._loop.create_future()
        pg.send_query_prepared(_PREPARED.encode(), None)
        while pg.flush():  # a few dozen bytes: sent at once unless the socket is backed up
            await asyncio.sleep(0.001)
        return await waiting

    def _readable(self) -> None:
        pg = self._pg
        try:
            pg.consume_input()
            while not pg.is_busy():
                result = pg.get_result()
                if result is None:
                    break  # the statement's results are all in
                if result.status == _TUPLES_OK and result.ntuples == 1:
                    self._value = int(result.get_value(0, 0) or b"")
                else:
                    self._error = (result.error_message or b"no row").decode(errors="replace")
            else:
                return  # more to come
        except Exception as exc:  # lost: the server went away, or what it sent makes no sense
            self._finish(exc)
            return
        waiting, self._waiting = self._waiting, None
        if waiting is None or waiting.done():
            return  # nothing asked (a notice), or the asker gave up (timed out)
        if self._value is None:
            waiting.set_exception(ConnectionError(self._error or "no epoch in the answer"))
        else:
            waiting.set_result(self._value)

    def _finish(self, exc: BaseException | None = None) -> None:
        """Close it, on its loop's thread; whoever waits gets `exc` (or a closed-connection error)."""
        if self.closed:
            return
        self.closed = True
        with suppress(Exception):  # the loop is closed already
            self._loop.remove_reader(self._fd)  # before the descriptor is closed and reused
        with suppress(Exception):
            self._pg.finish()
        waiting, self._waiting = self._waiting, None
        if waiting is not None and not waiting.done():
            waiting.set_exception(ConnectionError(str(exc or "the epoch connection was closed")))

    def drop(self) -> None:
        """Close it from any thread: on its loop's, while that loop runs elsewhere."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or loop.is_closed() or not loop.is_running():
            self._finish()
        else:
            with suppress(RuntimeError):  # closed meanwhile: its descriptors went with it
                loop.call_soon_threadsafe(self._finish)


_DISABLED = Epoch(enabled=False)
_EPOCHS: weakref.WeakKeyDictionary[Engine, ChangeEpoch] = weakref.WeakKeyDictionary()


_COPIES: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()
"""Each `with_options` copy, and the engine it copies: the copy writes through the same pool, so
it has the same epoch (SQLAlchemy names the copied engine only in a private attribute)."""


def with_options(engine: Engine, **options: Any) -> Engine:
    """`engine.execution_options(**options)`, a copy on the same pool, under `engine`'s epoch."""
    copy = engine.execution_options(**options)
    _COPIES[copy] = _COPIES.get(engine, engine)
    return copy


def epoch_of(engine: Engine) -> ChangeEpoch:
    """The epoch `track` gave `engine` (or the engine it is a `with_options` copy of); a
    disabled one for an engine nobody tracks."""
    found = _EPOCHS.get(engine)
    if found is None:
        found = _EPOCHS.get(_COPIES.get(engine, engine))
    return found or _DISABLED


def track(engine: Engine, epoch: ChangeEpoch) -> ChangeEpoch:
    """Bump `epoch` whenever a connection of `engine` that wrote goes back to the pool."""
    _EPOCHS[engine] = epoch

    @event.listens_for(engine, "after_cursor_execute")
    def _noted(conn: Any, _cursor: Any, statement: str, _params: Any, context: Any, _many: bool) -> None:
        info = conn.info
        if info.get(_DIRTY):
            return
        if context is not None and (context.isinsert or context.isupdate or context.isdelete):
            table = getattr(getattr(context.compiled, "statement", None), "table", None)
            if getattr(table, "name", None) not in QUIET_TABLES:
                info[_DIRTY] = True
        elif not statement.lstrip()[:6].upper().startswith(_READS):
            info[_DIRTY] = True

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_connection: Any, record: Any) -> None:
        # After the commit (or rollback): a reader that sees the new epoch sees the change.
        if record is None or record.info.pop(_DIRTY, False):
            epoch.bump(dbapi_connection)

    @event.listens_for(engine, "invalidate")
    def _invalidated(_dbapi_connection: Any, record: Any, _exception: Any) -> None:
        if record is None or record.info.pop(_DIRTY, False):
            epoch.bump()  # whether it committed is unknown: move it anyway, elsewhere

    return epoch
