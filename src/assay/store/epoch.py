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
  can open it). PostgreSQL: **none** — instances may run on several machines, where a file is no
  shared memory; `current()` is None and every request reads SQL as it did before.

The event log (`sandbox_events`, one insert per agent request) and the sweeper's lease are
`QUIET_TABLES`: the caches read neither, and bumping on each would make them useless.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

__all__ = ["QUIET_TABLES", "Epoch", "epoch_of", "track"]

QUIET_TABLES = frozenset({"sandbox_events", "leases"})
"""Tables whose writes do not bump the epoch: nothing cached reads them."""

_SIZE = 16
_DIRTY = "assay_epoch_dirty"
_READS = ("SELECT", "BEGIN", "PRAGMA", "SAVEPO", "RELEAS", "ROLLBA", "COMMIT", "SHOW")


class Epoch:
    """16 bytes that change whenever a tracked write commits; None from `current` when disabled."""

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

    def bump(self) -> None:
        with self._lock:
            self._map[:_SIZE] = os.urandom(_SIZE)

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()


_DISABLED = Epoch(enabled=False)
_EPOCHS: weakref.WeakKeyDictionary[Engine, Epoch] = weakref.WeakKeyDictionary()


def epoch_of(engine: Engine) -> Epoch:
    """The epoch `track` gave `engine` (or the engine it is an `execution_options` copy of); a
    disabled one for an engine nobody tracks."""
    found = _EPOCHS.get(engine)
    if found is None:
        proxied = getattr(engine, "_proxied", None)
        found = _EPOCHS.get(proxied) if proxied is not None else None
    return found or _DISABLED


def track(engine: Engine, epoch: Epoch) -> Epoch:
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
    def _returned(_dbapi_connection: Any, record: Any) -> None:
        # After the commit (or rollback): a reader that sees the new epoch sees the change.
        if record is None or record.info.pop(_DIRTY, False):
            epoch.bump()

    @event.listens_for(engine, "invalidate")
    def _invalidated(_dbapi_connection: Any, record: Any, _exception: Any) -> None:
        if record is None or record.info.pop(_DIRTY, False):
            epoch.bump()

    return epoch
