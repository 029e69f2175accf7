"""This process's queue for SQLite's one write lock: writers take their turns in arrival order.

SQLite admits one writer at a time. A writer that finds the lock taken waits in SQLite's busy
handler, which polls with growing sleeps (1 ms, 2 ms, … up to 100 ms), and a writer that arrives
later can take the lock between two polls: under 32 agents a `start` waited seconds behind writes
that came after it. So every write transaction on an SQLite engine a `Database` made — a request's
unit of work, a surface's `engine.begin()`, a `DriverTransaction`, the event log's writer — first
takes its turn here: the engine's `begin` listener (`queue_writes`) takes it before `BEGIN
IMMEDIATE`, and its `commit` and `rollback` listeners end the transaction themselves and then hand
the turn to the oldest waiter. SQLite's busy handler is left to arbitrate between processes on one
file only (`assay serve --workers N`). Reading units of work (`BEGIN`, not `BEGIN IMMEDIATE`) take
no turn: WAL lets them read beside the writer.

A turn is re-entrant on its thread: code that holds it (`Database.write_lock`, `write_turn`) and
then begins its transaction takes it again instead of waiting on itself.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

from assay.store.errors import Busy

__all__ = ["LOCK_WAIT", "FairLock", "queue_of", "queue_writes", "take_turn", "write_turn"]

LOCK_WAIT = 10.0
"""Seconds a transaction waits for the SQLite write lock before `Busy` (503)."""

_TURN = "assay_write_turn"
"""Key in a pooled connection's `info`: its transaction holds a turn of the queue."""


class FairLock:
    """A re-entrant lock handed to its waiters in arrival order, with a timeout.

    `threading.Lock` lets a thread that just released it take it again before the threads already
    waiting, so under steady traffic one waiter (the sweeper, a `complete`) could wait on and on.
    Here a release hands the lock straight to the oldest waiter.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self._waiters: deque[tuple[int, threading.Lock]] = deque()

    def acquire(self, timeout: float) -> bool:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return True
            if self._owner is None:
                self._owner, self._depth = me, 1
                return True
            turn = threading.Lock()
            turn.acquire()
            waiting = (me, turn)
            self._waiters.append(waiting)
        if turn.acquire(timeout=timeout):
            return True  # `release` handed it over
        with self._mutex:
            if self._owner == me:  # handed over between the timeout and here: ours after all
                return True
            self._waiters.remove(waiting)
            return False

    def release(self) -> None:
        with self._mutex:
            self._depth -= 1
            if self._depth > 0:
                return
            if self._waiters:
                owner, turn = self._waiters.popleft()
                self._owner, self._depth = owner, 1
                turn.release()
            else:
                self._owner = None


_QUEUES: weakref.WeakKeyDictionary[Engine, FairLock] = weakref.WeakKeyDictionary()


def queue_of(engine: Engine) -> FairLock | None:
    """The write queue of SQLite `engine`, or None (PostgreSQL, an engine no `Database` made)."""
    return _QUEUES.get(engine)


def take_turn(queue: FairLock) -> None:
    """Wait for a turn of `queue`; `Busy` after `LOCK_WAIT` seconds in line."""
    if not queue.acquire(LOCK_WAIT):
        raise Busy("the database write lock is taken", retry_after=1)


@contextmanager
def write_turn(engine: Engine) -> Iterator[None]:
    """Hold this process's turn at `engine`'s SQLite write lock across more than one transaction
    (nothing on PostgreSQL); `Busy` after `LOCK_WAIT` seconds in line. A single transaction needs
    no call: its `begin` takes the turn."""
    queue = queue_of(engine)
    if queue is None:
        yield
        return
    take_turn(queue)
    try:
        yield
    finally:
        queue.release()


def queue_writes(engine: Engine, queue: FairLock, *, is_reading: Any) -> None:
    """Start every write transaction of SQLite `engine` with a turn of `queue` and `BEGIN
    IMMEDIATE`, and every reading one (`is_reading(connection)`) with a plain `BEGIN`."""
    _QUEUES[engine] = queue

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        if is_reading(connection):
            connection.exec_driver_sql("BEGIN")
            return
        take_turn(queue)
        connection.info[_TURN] = True
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            del connection.info[_TURN]
            queue.release()
            raise

    # SQLAlchemy calls these listeners before it ends the transaction; the driver's own commit or
    # rollback here ends it first (SQLAlchemy's then finds none open), so the next writer's `BEGIN
    # IMMEDIATE` never meets the lock still held and falls into the busy handler's sleeps.
    @event.listens_for(engine, "commit")
    def _commit(connection: Any) -> None:
        if connection.info.pop(_TURN, False):
            try:
                connection.connection.driver_connection.commit()
            finally:
                queue.release()

    @event.listens_for(engine, "rollback")
    def _rollback(connection: Any) -> None:
        if connection.info.pop(_TURN, False):
            try:
                connection.connection.driver_connection.rollback()
            finally:
                queue.release()

    # A connection handed back with its transaction still holding a turn (a listener that raised
    # half-way) must not keep the queue: the pool rolls it back, and the turn moves on.
    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_connection: Any, record: Any) -> None:
        if record is not None and record.info.pop(_TURN, False):
            queue.release()

    @event.listens_for(engine, "invalidate")
    def _invalidate(_dbapi_connection: Any, record: Any, _error: Any) -> None:
        if record is not None and record.info.pop(_TURN, False):
            queue.release()
