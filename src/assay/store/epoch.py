"""The change epoch: "has anything the agent path caches changed since I read it?" without SQL.

The agent path keeps, per worker, what a request needs beyond its run token: the task run's state
and sandbox (`service/sandboxes/routes.py`) and how far a FHIR store's index is current
(`sandboxes/fhir/store.py`). Both go stale the moment any worker commits a change to those rows
(a `complete`, a cancel, the sweeper's timeout, a FHIR write). So:

- **Committed writes to what the caches read move the epoch.** `track` watches each connection of
  the engine: a statement that writes one of `WATCHED_TABLES` (the task runs, playgrounds,
  sandboxes and FHIR stores and versions), or a statement it cannot place (raw SQL that is not a
  read, DDL), marks the connection, and when the connection goes back to the pool — after its
  commit or rollback, before the request that wrote answers — the epoch is moved. No call site
  has to remember to invalidate anything; the sweeper and the CLI are covered too. Writes to
  other tables (the event log, HL7, X12, files, portal, voice, grading results) move nothing:
  no epoch-checked cache reads them.
- **Scoped, so one agent's write does not cold-start the others.** The epoch is a global value
  plus `SLOTS` slots; a key (a task run's or a benchmark run's id) hashes to one slot. Writes made
  inside `writes_of(task_run_id, benchmark_run_id)` (`start`, `complete`, and every request on a
  task run's sandbox surfaces, set by their dependency) move only those keys' slots; any other
  write moves the global value, which every reading checks. A reading is for one key (`current`,
  or the request's key set by `reads_of`): the global value and that key's slot. So a write on
  task run A leaves task run B's cached rows and FHIR index current unless their keys share a
  slot (a needless reload, never a stale answer). A scoped unit of work that reaches beyond its
  keys (`start` settling a sibling past its deadline) calls `widen` and moves the global value.
- **A cached entry is used only while the reading is the one taken before it was loaded.**
  Readers read the epoch first, then SQL: a change committed in between moves it after the read,
  so the entry is stale at once and reloaded on its next use. Never the other way round. Without
  a key there is no reading (`current` is None): nothing is cached, the caller reads SQL.
- **Where it lives.** SQLite file: 16 bytes (global) and 8 per slot in a file beside the database
  (`assay.db-epoch`), mapped into the memory of every process that opens the database through
  `Database`; a move writes random bytes, a reading is a memory read (workers of one
  `assay serve` share the file, as they share the database file). SQLite in memory: this process
  only. PostgreSQL (`PostgresEpoch`, `store/epoch_postgres.py`): the sequence `assay_change_epoch` (global) and one sequence
  per slot (`assay_change_epoch_<n>`, migration `0018_epoch_slots`) in the database itself, so
  instances on several machines share them. A move is a `nextval` on the connection that wrote,
  after its commit (non-transactional: writers never wait for each other on it); reading costs a
  round trip (both values in one statement), so it is read once per agent request, on the event
  loop, before anything is loaded (`snapshot`, called by `AssayApp` for the surface paths), and
  `current()` answers that request's snapshot — None outside such a request, or once this process
  wrote to the global value or that slot since. A failed read is a None snapshot: the request
  reads SQL, it does not fail.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import weakref
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

__all__ = [
    "SEQUENCE",
    "SLOTS",
    "WATCHED_TABLES",
    "ChangeEpoch",
    "Epoch",
    "epoch_of",
    "reads_of",
    "scope_writes",
    "slot_of",
    "track",
    "widen",
    "with_options",
    "writes_of",
]

WATCHED_TABLES = frozenset({"task_runs", "playgrounds", "sandboxes", "fhir_stores", "fhir_versions"})
"""Tables the epoch-checked caches read (`SandboxRows`, the FHIR index): a write to any other
table moves nothing. A cache that starts reading another table adds it here."""

SEQUENCE = "assay_change_epoch"
"""PostgreSQL's global epoch (migration `0009_change_epoch`); slot `n` is `<SEQUENCE>_<n>`."""

SLOTS = 256
"""Slots keys hash to (`slot_of`): with 32 agents at once, a task run shares its slot with
another's about one time in eight, and then only reloads when that one writes."""

_SIZE = 16
_SLOT_SIZE = 8
_GLOBAL = "assay_epoch_global"
_KEYS = "assay_epoch_keys"
_READS = ("SELECT", "BEGIN", "PRAGMA", "SAVEPO", "RELEAS", "ROLLBA", "COMMIT", "SHOW")
_LOG = logging.getLogger(__name__)

_WRITES: ContextVar[tuple[str, ...] | None] = ContextVar("assay_epoch_writes", default=None)
"""The keys this context's writes belong to; None: any write moves the global value."""
_READ_KEY: ContextVar[str | None] = ContextVar("assay_epoch_read_key", default=None)
"""The key this request reads for (`reads_of`), when a reader names none."""


def slot_of(key: str) -> int:
    """The slot `key` moves and is read from: the same in every process (not Python's `hash`)."""
    return zlib.crc32(key.encode()) % SLOTS


@contextmanager
def writes_of(*keys: str | None) -> Iterator[None]:
    """Writes inside move only `keys`' slots (module docstring); flush the session before leaving,
    so the ORM's pending writes are issued inside."""
    token = _WRITES.set(tuple(key for key in keys if key))
    try:
        yield
    finally:
        _WRITES.reset(token)


def scope_writes(*keys: str | None) -> None:
    """`writes_of` for the rest of this context: for a request's dependency, whose context the
    handler (and its worker thread, which copies it) runs in."""
    _WRITES.set(tuple(key for key in keys if key))


def reads_of(key: str | None) -> None:
    """The key readings in this context are for when the reader names none (for the rest of it:
    a request's, set before anything is loaded)."""
    _READ_KEY.set(key)


def widen(connection: Any) -> None:
    """This unit of work (on `connection`, a SQLAlchemy `Connection`) wrote beyond its scope's
    keys: it moves the global value when it goes back to the pool."""
    connection.info[_GLOBAL] = True


class ChangeEpoch:
    """What the caches ask: `current(key)` — bytes that change whenever a tracked write that
    concerns `key` commits, or None when nothing may be cached."""

    remote = False
    """True when reading it costs a round trip: `snapshot` it once per agent request first."""

    def current(self, key: str | None = None) -> bytes | None:
        return None

    async def snapshot(self) -> None:
        """Read the epoch for the rest of this request (`PostgresEpoch`); nothing for the others."""

    def bump(self, dbapi_connection: Any = None, keys: Iterable[str] | None = None) -> None:
        """A tracked write committed (on `dbapi_connection`, back in the pool, when known): moves
        `keys`' slots, or the global value when None."""

    async def aclose(self) -> None:
        """Close what `snapshot` opened on the running event loop."""

    def close(self) -> None:
        pass


class Epoch(ChangeEpoch):
    """16 bytes and `SLOTS` slots of 8 in memory (a file mapped by every process on one SQLite
    file, or this process's own); None from `current` when disabled."""

    def __init__(self, path: Path | None = None, *, enabled: bool = True):
        self.enabled = enabled
        self._lock = threading.Lock()
        self._map: mmap.mmap | bytearray
        size = _SIZE + SLOTS * _SLOT_SIZE
        if path is None:
            self._map = bytearray(os.urandom(size))
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)  # two workers racing here both leave zero bytes
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def current(self, key: str | None = None) -> bytes | None:
        """The reading for `key` (default: this request's) now, or None (nothing may be cached)."""
        if key is None:
            key = _READ_KEY.get()
        if key is None or not self.enabled:
            return None
        slot = slot_of(key)
        at = _SIZE + slot * _SLOT_SIZE
        found = self._map
        return bytes(found[:_SIZE]) + bytes(found[at : at + _SLOT_SIZE]) + slot.to_bytes(2, "big")

    def bump(self, dbapi_connection: Any = None, keys: Iterable[str] | None = None) -> None:
        with self._lock:
            if keys is None:
                self._map[:_SIZE] = os.urandom(_SIZE)
                return
            for slot in {slot_of(key) for key in keys}:
                at = _SIZE + slot * _SLOT_SIZE
                self._map[at : at + _SLOT_SIZE] = os.urandom(_SLOT_SIZE)

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()


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
        if info.get(_GLOBAL):
            return
        if context is not None and (context.isinsert or context.isupdate or context.isdelete):
            table = getattr(getattr(context.compiled, "statement", None), "table", None)
            name = getattr(table, "name", None)
            if name is not None and name not in WATCHED_TABLES:
                return
        elif statement.lstrip()[:6].upper().startswith(_READS):
            return
        keys = _WRITES.get()
        if keys:
            found = info.get(_KEYS)
            if found is None:
                info[_KEYS] = set(keys)
            else:
                found.update(keys)
        else:
            info[_GLOBAL] = True

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_connection: Any, record: Any) -> None:
        # After the commit (or rollback): a reader that sees the new epoch sees the change.
        if record is None:
            epoch.bump(dbapi_connection)
            return
        moved, keys = record.info.pop(_GLOBAL, False), record.info.pop(_KEYS, None)
        if moved or keys:
            epoch.bump(dbapi_connection, None if moved else keys)

    @event.listens_for(engine, "invalidate")
    def _invalidated(_dbapi_connection: Any, record: Any, _exception: Any) -> None:
        # Whether it committed is unknown: move it anyway, elsewhere.
        if record is None:
            epoch.bump()
            return
        moved, keys = record.info.pop(_GLOBAL, False), record.info.pop(_KEYS, None)
        if moved or keys:
            epoch.bump(None, None if moved else keys)

    return epoch
