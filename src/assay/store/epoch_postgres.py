"""The change epoch on PostgreSQL (`store/epoch.py` says what the epoch is and why): the
sequence `assay_change_epoch` and one sequence per slot in the database itself, so instances on
several machines share them. A move is a `nextval` on the connection that wrote, after its commit;
a reading costs a round trip, taken once per agent request on the event loop (`snapshot`) by a
small pool of reader connections of its own."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from contextlib import suppress
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Engine

from assay.store.epoch import _LOG, _READ_KEY, SEQUENCE, SLOTS, ChangeEpoch, slot_of

__all__ = ["CONNECTIONS", "READ_WAIT", "RETRY_AFTER", "PostgresEpoch"]

_SNAPSHOT: ContextVar[tuple[PostgresEpoch, int, bytes, int, int] | None] = ContextVar(
    "assay_epoch", default=None
)
"""(epoch, the slot read, the reading at the start of this request, that process's global and
slot write counts then)."""

READ_WAIT = 2.0
"""Seconds a read of PostgreSQL's epoch may take (connecting included) before the request goes
on without it (reading SQL, as with no epoch)."""
RETRY_AFTER = 1.0
"""Seconds after a failed read before the next attempt to reconnect: meanwhile, no snapshot."""
CONNECTIONS = 2
"""Epoch reads one worker may have in flight at once (`_Reader`), each on a connection of its own."""

_TUPLES_OK = 2  # psycopg.pq.ExecStatus.TUPLES_OK, without importing psycopg where it is absent
_GLOBAL_SLOT = -1


def _sequence(slot: int) -> str:
    return SEQUENCE if slot == _GLOBAL_SLOT else f"{SEQUENCE}_{slot}"


_PREPARED = "assay_epoch_read"
_READ = (
    f"SELECT {_GLOBAL_SLOT}, last_value FROM {SEQUENCE} UNION ALL "
    # NULL until its first `nextval` (`last_value` alone reads 1 both before and after it).
    f"SELECT s, coalesce(pg_sequence_last_value(format('{SEQUENCE}_%s', s)::regclass), 0) "
    "FROM unnest($1::int[]) AS s"
)
"""The global value and the slots asked for, as rows of (slot, value): prepared once per
connection, so a read costs the server no parsing or planning."""


def _slots_parameter(slots: Iterable[int]) -> bytes:
    return ("{" + ",".join(str(slot) for slot in sorted(set(slots))) + "}").encode()


def _bump_statement(keys: Iterable[str] | None) -> str:
    slots = [_GLOBAL_SLOT] if keys is None else sorted({slot_of(key) for key in keys})
    return "SELECT " + ", ".join(f"nextval('{_sequence(slot)}')" for slot in slots)


def _reading(values: dict[int, int], slot: int) -> bytes | None:
    found = values.get(slot)
    if found is None or _GLOBAL_SLOT not in values:
        return None
    return (
        values[_GLOBAL_SLOT].to_bytes(8, "big", signed=True)
        + found.to_bytes(8, "big", signed=True)
        + slot.to_bytes(2, "big")
    )


class PostgresEpoch(ChangeEpoch):
    """The sequences `assay_change_epoch` and `assay_change_epoch_<slot>`: moved after each
    tracked commit, read once per agent request on the event loop (module docstring)."""

    remote = True

    def __init__(self, engine: Engine):
        args, params = engine.dialect.create_connect_args(engine.url)
        params.pop("context", None)  # the dialect's adapters: nothing we read needs them
        params.setdefault("connect_timeout", max(2, int(READ_WAIT)))
        self._args, self._params = list(args), {**params, "application_name": "assay-epoch"}
        self._lock = threading.Lock()
        self._writes = 0
        """Commits by this process that moved the global value: a snapshot older than one of
        them vouches for nothing."""
        self._slot_writes = [0] * SLOTS
        """The same, per slot."""
        self._reader: _Reader | None = None

    def current(self, key: str | None = None) -> bytes | None:
        found = _SNAPSHOT.get()
        if found is None or found[0] is not self:
            return None
        if key is None:
            key = _READ_KEY.get()
            if key is None:
                return None
        slot = slot_of(key)
        if found[1] != slot or found[3] != self._writes or found[4] != self._slot_writes[slot]:
            return None
        return found[2]

    async def snapshot(self) -> None:
        """Read the global value and the slot of this request's key (`reads_of`, set first)."""
        key = _READ_KEY.get()
        if key is None:
            _SNAPSHOT.set(None)
            return
        slot = slot_of(key)
        # Before the read: a commit of ours after it voids the snapshot.
        writes, slot_writes = self._writes, self._slot_writes[slot]
        reader = self._reader
        loop = asyncio.get_running_loop()
        if reader is None or reader.loop is not loop:
            if reader is not None:
                reader.drop()
            reader = self._reader = _Reader(loop, self._connect)
        try:
            value = await reader.read(slot)
        except Exception:  # never the request's failure: it reads SQL instead
            _LOG.exception("reading the change epoch failed")
            value = None
        _SNAPSHOT.set(None if value is None else (self, slot, value, writes, slot_writes))

    async def _connect(self) -> _EpochConnection:
        return await _EpochConnection.open(self._args, self._params)

    def bump(self, dbapi_connection: Any = None, keys: Iterable[str] | None = None) -> None:
        with self._lock:
            if keys is None:
                self._writes += 1
            else:
                for slot in {slot_of(key) for key in keys}:
                    self._slot_writes[slot] += 1
        statement = _bump_statement(keys)
        if dbapi_connection is not None and _nextval(dbapi_connection, statement):
            return
        # The connection that wrote is gone (invalidated) or failed just now: one of our own.
        try:
            connection = self._connect_sync()
            try:
                connection.execute(statement)
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


def _nextval(connection: Any, statement: str) -> bool:
    """`statement` (the `nextval`s) on a psycopg connection just back in the pool (its transaction
    already ended), in autocommit for one round trip; False when that failed."""
    try:
        import psycopg.pq

        if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            connection.rollback()
        autocommit = connection.autocommit
        connection.autocommit = True
        try:
            connection.execute(statement)
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
        self._next: asyncio.Future[dict[int, int] | None] | None = None
        self._next_slots: set[int] = set()
        """The slots the requests waiting for `_next` read."""
        self._tasks: set[asyncio.Task[None]] = set()
        """The serving tasks, held so the loop's weak references do not let them be collected."""
        self._retry_at = 0.0
        self._failing = False

    async def read(self, slot: int) -> bytes | None:
        """The global value and `slot`'s, read by a statement sent after this call."""
        waiting = self._next
        if waiting is None:
            waiting = self._next = self.loop.create_future()
            self._next_slots = set()
            if self._free:
                task = self.loop.create_task(self._serve(self._free.pop()))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self._next_slots.add(slot)
        # Shielded: one caller cancelled (its client went away) must not cancel the others' read.
        values = await asyncio.shield(waiting)
        return None if values is None else _reading(values, slot)

    async def _serve(self, slot: int) -> None:
        waiting: asyncio.Future[dict[int, int] | None] | None = None
        try:
            while self._next is not None:
                waiting, self._next = self._next, None
                value = await self._read_once(slot, self._next_slots)
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

    async def _read_once(self, slot: int, slots: set[int]) -> dict[int, int] | None:
        try:
            async with asyncio.timeout(READ_WAIT):
                connection = self._connections[slot]
                if connection is None or connection.closed:
                    if time.monotonic() < self._retry_at:
                        return None
                    connection = self._connections[slot] = await self._connect()
                    value = await connection.read(slots)
                else:
                    try:
                        value = await connection.read(slots)
                    except ConnectionError:
                        # A connection the server closed since its last read (a restart): one new
                        # connection, at once, rather than a second of requests without an epoch.
                        self._drop(slot)
                        connection = self._connections[slot] = await self._connect()
                        value = await connection.read(slots)
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
        return value

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
    """One autocommit connection reading the sequences through libpq directly (psycopg's `pq`
    layer): the statement prepared once, each read a `send_query_prepared` answered through a
    reader callback registered on the socket for the connection's life. Through psycopg's
    `AsyncConnection.execute` and `fetchone` a read cost the event loop about 100 us of Python
    (a cursor, generators, a reader registered and removed for each wait) — one read per two agent
    requests under load, so ~10% of a loaded worker's GIL time."""

    def __init__(self, connection: Any, loop: asyncio.AbstractEventLoop):
        self._connection = connection  # psycopg's, for `info` and what it owns
        self._pg = connection.pgconn
        self._loop = loop
        self._fd = self._pg.socket
        self._waiting: asyncio.Future[dict[int, int]] | None = None
        self._value: dict[int, int] | None = None
        self._error: str | None = None
        self.closed = False
        loop.add_reader(self._fd, self._readable)

    @classmethod
    async def open(cls, args: list[Any], params: dict[str, Any]) -> _EpochConnection:
        import psycopg

        connection = await psycopg.AsyncConnection.connect(*args, **params, autocommit=True)
        try:
            await connection.execute(f"PREPARE {_PREPARED}(int[]) AS {_READ}")
        except BaseException:
            await connection.close()
            raise
        return cls(connection, asyncio.get_running_loop())

    @property
    def info(self) -> Any:
        return self._connection.info

    async def read(self, slots: Iterable[int]) -> dict[int, int]:
        """The global value and `slots`' (`_GLOBAL_SLOT` for the global one), read by a statement
        sent now."""
        if self.closed or self._waiting is not None:
            raise ConnectionError("the epoch connection is closed or busy")
        pg = self._pg
        self._value = self._error = None
        # Waited for before it is sent: the answer may come while the flush below waits.
        waiting = self._waiting = self._loop.create_future()
        pg.send_query_prepared(_PREPARED.encode(), [_slots_parameter(slots)])
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
                if result.status == _TUPLES_OK and result.ntuples >= 1:
                    self._value = {
                        int(result.get_value(row, 0) or b""): int(result.get_value(row, 1) or b"")
                        for row in range(result.ntuples)
                    }
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
