"""The SQLite write queue: a process's write transactions take SQLite's write lock in arrival order.

SQLite has one writer at a time, and every transaction that is not a `read_only` one starts with
`BEGIN IMMEDIATE` (`store/database.py`), so every such transaction waits for the one before it
either way; transactions that only read belong on the read engine, which takes no turn
(docs/decisions/load.md states which do). Where it waits is what matters: at SQLite's own lock a waiter sits in the busy
handler, which polls with growing sleeps (1, 2, 5 … up to 100 ms), so under load a writer that
arrived first could be overtaken again and again and a `start` waited seconds behind the
surfaces' writes (p99 ~2 s at 32 agents). Here each write transaction of the process queues
behind one `FairLock` first, and a commit hands SQLite's lock straight to the oldest waiter.

The queue is taken where the transaction begins, for every way of beginning one, so no call site
has to remember it: `queue_writes` has the engine's `BEGIN IMMEDIATE` listener take a turn before
it emits the statement (ORM sessions, `engine.begin()`, a connection's autobegin — a read on the
write engine takes SQLite's write lock too), and `DriverTransaction` takes one itself. The turn is
given back once the transaction has ended: after the COMMIT or ROLLBACK ran (the dialect's own,
also the pool's rollback on return), or when the connection is invalidated or checked in with
the turn still on it.

A thread's turn is re-entrant: a transaction begun on a thread that already holds the turn (the
event writer's explicit `write_turn`, a request's session that opens a second connection) goes
on instead of queueing behind itself. Other processes on the same file (`--workers N`, the
listener process) still meet at SQLite's lock and its busy handler. PostgreSQL has no queue: its
writers wait on the rows they lock.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.pool import Pool

from assay.store.errors import Busy

__all__ = ["LOCK_WAIT", "FairLock", "end_turn", "queue_of", "queue_writes", "take_turn", "write_turn"]

LOCK_WAIT = 10.0
"""Seconds a transaction waits for the SQLite write lock (in the queue, then at SQLite's own
lock for another process's writer) before `Busy` (503)."""

_TURN = "assay_write_turn"
"""Where a pooled connection keeps the queue whose turn it holds (its record's `info`)."""


class FairLock:
    """A lock handed to its waiters in arrival order, with a timeout; re-entrant per thread.

    `threading.Lock` lets a thread that just released it take it again before the threads already
    waiting, so under steady traffic one waiter (the sweeper, a `complete`) could wait on and on.
    Here a release hands the lock straight to the oldest waiter. A thread that holds it and
    acquires again only counts one more release: a transaction begun inside another on the
    same thread must not wait for its own thread.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self._waiters: deque[tuple[threading.Lock, int]] = deque()

    def acquire(self, timeout: float) -> bool:
        me = threading.get_ident()
        with self._mutex:
            if self._depth == 0:
                self._owner, self._depth = me, 1
                return True
            if self._owner == me:
                self._depth += 1
                return True
            turn = threading.Lock()
            turn.acquire()
            waiter = (turn, me)
            self._waiters.append(waiter)
        if turn.acquire(timeout=timeout):
            return True  # `release` handed it over
        with self._mutex:
            try:
                self._waiters.remove(waiter)
            except ValueError:  # handed over between the timeout and here: ours after all
                return True
            return False

    def release(self) -> None:
        """Give one acquire back; the last one hands the lock to the oldest waiter. Any thread may
        call it (a pooled connection can be returned from another thread than the one that began
        its transaction)."""
        with self._mutex:
            if self._depth > 1:
                self._depth -= 1
                return
            if self._waiters:
                turn, self._owner = self._waiters.popleft()
                turn.release()  # still held, depth 1: now by the oldest waiter
            else:
                self._owner, self._depth = None, 0

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    @property
    def waiting(self) -> int:
        """How many threads are in line behind the holder."""
        with self._mutex:
            return len(self._waiters)


_QUEUES: weakref.WeakKeyDictionary[Pool, FairLock] = weakref.WeakKeyDictionary()
"""By pool: an engine's `execution_options` copies (the read engine) share its pool and its queue."""


def queue_of(engine: Engine) -> FairLock | None:
    """The write queue of `engine` (or of the engine it is a copy of); None on PostgreSQL and for
    an engine `queue_writes` was not called on."""
    return _QUEUES.get(engine.pool)


def take_turn(pooled: Any, queue: FairLock) -> None:
    """Wait for `queue`'s turn in line, then mark `pooled` (a pooled DB-API connection) as holding
    it until `end_turn`; `Busy` after `LOCK_WAIT` seconds in line."""
    if not queue.acquire(LOCK_WAIT):
        raise Busy("the database write lock is taken", retry_after=1)
    held = pooled.info.setdefault(_TURN, [])
    held.append(queue)


def end_turn(pooled: Any) -> None:
    """Give back the turn `pooled` holds, if any."""
    try:
        info = pooled.info
    except NotImplementedError:  # the engine's first-connect probe: a bare connection, never in line
        return
    held = info.pop(_TURN, None)
    for queue in held or ():
        queue.release()


def _end_turn_of_record(_dbapi_connection: Any, record: Any, *_rest: Any) -> None:
    held = record.info.pop(_TURN, None)
    for queue in held or ():
        queue.release()


def queue_writes(engine: Engine) -> FairLock:
    """Give SQLite `engine` its write queue: its `begin` listener calls `take_turn` before
    `BEGIN IMMEDIATE`; this ends the turn once the dialect's COMMIT or ROLLBACK has run, and as a
    last resort when the connection is invalidated or goes back to the pool still holding it."""
    queue = FairLock()
    _QUEUES[engine.pool] = queue
    dialect = engine.dialect
    commit: Callable[[Any], None] = dialect.do_commit
    rollback: Callable[[Any], None] = dialect.do_rollback

    def do_commit(pooled: Any) -> None:
        commit(pooled)
        end_turn(pooled)  # not on a failed COMMIT: the transaction holds SQLite's lock until its rollback

    def do_rollback(pooled: Any) -> None:
        try:
            rollback(pooled)
        finally:
            end_turn(pooled)

    dialect.do_commit = do_commit  # type: ignore[method-assign, assignment]
    dialect.do_rollback = do_rollback  # type: ignore[method-assign, assignment]
    event.listen(engine.pool, "invalidate", _end_turn_of_record)
    event.listen(engine.pool, "checkin", _end_turn_of_record)
    return queue


@contextmanager
def write_turn(engine: Engine) -> Iterator[None]:
    """This thread's turn in `engine`'s write queue held across the block (nothing on PostgreSQL):
    for work that must not interleave with other writers across several transactions. A single
    transaction takes its turn by itself. `Busy` after `LOCK_WAIT` seconds in line."""
    queue = queue_of(engine)
    if queue is None:
        yield
        return
    if not queue.acquire(LOCK_WAIT):
        raise Busy("the database write lock is taken", retry_after=1)
    try:
        yield
    finally:
        queue.release()
