"""Which failures are a dependency's fault rather than a bug: an outage (the database or the object
store unreachable, restarting, read-only) or a full disk. The HTTP error boundary answers them 503
(`SERVICE_UNAVAILABLE`, with `Retry-After`) and 507 (`INSUFFICIENT_STORAGE`); the listeners answer
them in their protocols' terms; the event writer keeps its events through an outage.

Classified by what the drivers say, on the exception and the ones it wraps (SQLAlchemy's `orig`,
`__cause__`, `__context__`): a SQLAlchemy error whose connection was invalidated; a PostgreSQL
SQLSTATE of class 08 (connection exception), 57P01–57P03 (shut down by an administrator, crashed,
cannot connect now), 25006 (read-only transaction: a standby, or `default_transaction_read_only`),
53200 (out of memory), 58030 (I/O error), 53100 (disk full); psycopg's `OperationalError` without a
SQLSTATE (a connection refused or lost before any answer), `ConnectionTimeout` (a host that does
not answer within `connect_timeout`) and `InterfaceError` (the connection is closed); SQLite's "database or disk is full", "disk I/O error", "unable to open database file",
"attempt to write a readonly database"; `OSError` with `ENOSPC`/`EDQUOT`; a connection error of the
object store's client. Saturation (`too many clients`, "database is locked", an empty pool) is not
an outage: `service/errors.py` answers it as busy first.
"""

from __future__ import annotations

import errno
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.exc import DBAPIError

__all__ = ["DATABASE", "OBJECT_STORAGE", "RETRY_AFTER", "disk_full", "no_space", "note_no_space", "outage"]

DATABASE = "database"
OBJECT_STORAGE = "object storage"
RETRY_AFTER = 1
"""Seconds an outage's 503 asks a client to wait (`Retry-After`): a PostgreSQL restart takes about
that long, and the SDK retries within its bounded budget."""

_OUTAGE_STATES = frozenset({"57P01", "57P02", "57P03", "25006", "53200", "58030"})
_NO_SPACE_STATES = frozenset({"53100"})
_SQLITE_OUTAGE = ("disk i/o error", "unable to open database file", "attempt to write a readonly database")
_SQLITE_FULL = "database or disk is full"
_STORAGE_ERRORS = frozenset(
    {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ClientConnectorError"}
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending and len(seen) < 8:
        found = pending.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        pending += [found.__context__, found.__cause__, getattr(found, "orig", None)]


def _driver(found: BaseException) -> str:
    return type(found).__module__.split(".")[0]


def outage(exc: BaseException) -> str | None:
    """The dependency (`DATABASE`, `OBJECT_STORAGE`) whose outage `exc` is, or None."""
    for found in _chain(exc):
        if isinstance(found, DBAPIError) and found.connection_invalidated:
            return DATABASE
        state = getattr(found, "sqlstate", None)
        if isinstance(state, str) and (state.startswith("08") or state in _OUTAGE_STATES):
            return DATABASE
        driver = _driver(found)
        if driver == "psycopg" and state is None:
            name = type(found).__name__
            if name in ("InterfaceError", "ConnectionTimeout") or (
                name == "OperationalError" and "too many clients" not in str(found)
            ):
                return DATABASE
        if driver == "sqlite3" and any(text in str(found).lower() for text in _SQLITE_OUTAGE):
            return DATABASE
        if type(found).__name__ in _STORAGE_ERRORS and driver in ("botocore", "aiohttp", "urllib3"):
            return OBJECT_STORAGE
    return None


def no_space(exc: BaseException) -> bool:
    """Whether `exc` says a disk (the data dir's, the database server's) is full."""
    for found in _chain(exc):
        if isinstance(found, OSError) and found.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(found, "sqlstate", None) in _NO_SPACE_STATES:
            return True
        if _driver(found) == "sqlite3" and _SQLITE_FULL in str(found).lower():
            return True
    return False


_FREED = 1024 * 1024
"""Bytes that must come free on a disk, after a write found it full, for it to count as not full."""
_FULL: dict[str, int] = {}
_FULL_LOCK = threading.Lock()


def note_no_space(path: Path) -> None:
    """A write under `path` found no space: remember how much was free then (this process only)."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return
    with _FULL_LOCK:
        _FULL[str(path)] = free


def disk_full(path: Path) -> str | None:
    """Why the disk of `path` counts as full — a write found no space there and nothing was freed
    since (`_FREED`) — or None."""
    with _FULL_LOCK:
        then = _FULL.get(str(path))
    if then is None:
        return None
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None
    if free >= then + _FREED:
        with _FULL_LOCK:
            _FULL.pop(str(path), None)
        return None
    return f"{path}: a write found no space left, {free} bytes free"
