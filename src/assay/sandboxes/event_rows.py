"""The sandbox event log's rows: an event as the row stored (`event_row`, bodies as JSON or text,
capped at `MAX_BODY`) and appending a batch of them, each with its sandbox's next `seq`, in the
caller's transaction (`append`: one multi-row INSERT; on PostgreSQL one COPY past `_COPY_ROWS`).
The queue and writer thread that call it are `events.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Dialect, Integer, String, bindparam, insert, select, text

from assay.sandboxes.json_depth import nested_deeper_than
from assay.store.copy_text import copy_field
from assay.store.driver import DriverTransaction
from assay.store.json_values import JsonText, strict_json_problem
from assay.store.models import Sandbox, SandboxEvent, UtcDateTime

if TYPE_CHECKING:
    import psycopg

__all__ = ["MAX_BODY", "Queued", "append", "event_row", "listed_after", "stored_body"]

MAX_BODY = 1024 * 1024


@dataclass(slots=True)
class Queued:
    id: str
    created_at: datetime
    org_id: str
    sandbox_id: str
    type: str
    method: str | None
    path: str | None
    status: int | None
    request: bytes
    response: bytes
    response_json: bool = False
    ticket: int = field(default=0)
    task_run_id: str | None = None
    missing: int = 0
    """For an `events_missing` event: how many events it stands for (counted until it is written)."""


def stored_body(raw: bytes) -> tuple[Any, bool]:
    """(value to store, truncated): parsed JSON when it is JSON, else text; None when empty."""
    if not raw:
        return None, False
    if len(raw) > MAX_BODY:
        return raw[:MAX_BODY].decode("utf-8", errors="ignore"), True
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: absurdly deep JSON
        return raw.decode("utf-8", errors="replace"), False
    if nested_deeper_than(value) or strict_json_problem(value):
        # The surfaces refused it (400); listing events must not recurse, nor fail to encode it.
        return raw.decode("utf-8", errors="replace"), False
    return value, False


def event_row(event: Queued, passthrough: bool) -> dict[str, Any]:
    request_body, request_cut = stored_body(event.request)
    response_body: Any
    if event.missing:
        response_body, response_cut = {"missing": event.missing}, False
    elif event.response_json and passthrough and 0 < len(event.response) <= MAX_BODY:
        response_body, response_cut = JsonText(event.response.decode("utf-8")), False
    else:
        response_body, response_cut = stored_body(event.response)
    return {
        "id": event.id,
        "created_at": event.created_at,
        "org_id": event.org_id,
        "sandbox_id": event.sandbox_id,
        "type": event.type,
        "method": event.method,
        "path": event.path,
        "status": event.status,
        "request": request_body,
        "response": response_body,
        "truncated": request_cut or response_cut,
    }


# Built once: building these per event cost more than running them (docs/performance.md, "MLLP").
_LOCK_SANDBOX = select(Sandbox.id).where(Sandbox.id == bindparam("sandbox_id")).with_for_update()
_LAST_EVENT = (
    select(SandboxEvent.seq, SandboxEvent.created_at, SandboxEvent.id)
    .where(SandboxEvent.sandbox_id == bindparam("sandbox_id"))
    .order_by(SandboxEvent.seq.desc())
    .limit(1)
)
_LOCK_SANDBOXES = text("SELECT id FROM sandboxes WHERE id = ANY(CAST(:ids AS text[])) ORDER BY id FOR UPDATE")
_LAST_EVENTS = text(
    "SELECT s.sandbox_id, e.seq, e.created_at, e.id FROM unnest(CAST(:ids AS text[])) AS s(sandbox_id) "
    "CROSS JOIN LATERAL (SELECT seq, created_at, id FROM sandbox_events "
    "WHERE sandbox_id = s.sandbox_id ORDER BY seq DESC LIMIT 1) AS e"
).columns(sandbox_id=String, seq=Integer, created_at=UtcDateTime(), id=String)
"""PostgreSQL, a batch's sandboxes at once (`_last_events`); each last event by the unique
(sandbox_id, seq) index, read backwards."""
_INSERT_EVENTS = insert(SandboxEvent)
_COPY_ROWS = 2
"""Rows from which a PostgreSQL append goes by `COPY` rather than the INSERT (`_copies`)."""


def append(conn: Connection | DriverTransaction, rows: list[dict[str, Any]]) -> None:
    """Give each row the next `seq` of its sandbox, in order, and insert them all."""
    last_of = _last_events(conn, list(dict.fromkeys(row["sandbox_id"] for row in rows)))
    for row in rows:
        last = last_of[row["sandbox_id"]]
        row["created_at"] = listed_after(last, row["id"], row["created_at"])
        row["seq"] = (last[0] if last else 0) + 1
        last_of[row["sandbox_id"]] = (row["seq"], row["created_at"], row["id"])
    if isinstance(conn, Connection) and _copies(conn.dialect, len(rows)):
        copy(conn, rows)
    else:
        conn.execute(_INSERT_EVENTS, rows)


def _last_events(
    conn: Connection | DriverTransaction, sandbox_ids: list[str]
) -> dict[str, tuple[int, datetime, str] | None]:
    """(seq, created_at, id) of each sandbox's last event, None for a sandbox with none yet.

    Appends to one sandbox take turns on its row (PostgreSQL; SQLite's BEGIN IMMEDIATE already
    serializes, and would ignore FOR UPDATE): another worker's writer may be appending to it
    too. The last events are read after the locks are held, by a statement of their own (under
    READ COMMITTED it sees what the previous holder committed). In a writer's batch on
    PostgreSQL that is two statements for all its sandboxes, locked in id order (two
    per sandbox were most of a small batch's client CPU; and two workers' writers locking the
    same sandboxes in different orders could deadlock)."""
    if isinstance(conn, Connection) and conn.dialect.name == "postgresql":
        conn.execute(_LOCK_SANDBOXES, {"ids": sorted(sandbox_ids)})
        last_of: dict[str, tuple[int, datetime, str] | None] = dict.fromkeys(sandbox_ids)
        for last in conn.execute(_LAST_EVENTS, {"ids": sandbox_ids}):
            last_of[last.sandbox_id] = (last.seq, last.created_at, last.id)
        return last_of
    return _last_events_each(conn, sandbox_ids)


def _last_events_each(
    conn: Connection | DriverTransaction, sandbox_ids: list[str]
) -> dict[str, tuple[int, datetime, str] | None]:
    """`_last_events` by two statements a sandbox (one on SQLite): SQLite (no LATERAL; in
    process, a statement costs no round trip) and `write_event`'s `DriverTransaction`."""
    last_of: dict[str, tuple[int, datetime, str] | None] = {}
    for sandbox_id in sandbox_ids:
        if conn.dialect.name != "sqlite":
            conn.execute(_LOCK_SANDBOX, {"sandbox_id": sandbox_id})
        found = conn.execute(_LAST_EVENT, {"sandbox_id": sandbox_id}).first()
        last_of[sandbox_id] = None if found is None else (found.seq, found.created_at, found.id)
    return last_of


def _copies(dialect: Dialect, rows: int) -> bool:
    """Whether an append of `rows` rows in a SQLAlchemy `Connection` goes by `COPY` (`_copy`): a
    batch, on PostgreSQL with psycopg. One row (a lone event; `write_event`, which may hold a
    `DriverTransaction`, always) goes by the INSERT, one round trip fewer."""
    return rows >= _COPY_ROWS and dialect.name == "postgresql" and dialect.driver == "psycopg"


def copy(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Write `rows` with `COPY sandbox_events (…) FROM STDIN` in `conn`'s transaction (
    psycopg's pipelined executemany of the INSERT was a quarter of an agent-loaded process's
    samples, in the writer thread). Each value goes through its column's bind processor for this
    dialect, as the INSERT's does, so the rows stored are the same: JSON bodies serialized by the
    engine's `json_serializer` (a `JsonText` as it is, None as JSON `null`), `created_at` as
    naive UTC. The batch goes as one text-format payload built here (`_copy_payload`): psycopg's
    `write_row`, a Python call per field, was 45% of the writer thread's GIL time under agent load.
    A row the database refuses fails the whole COPY, as it failed the INSERT: the
    transaction is rolled back and `_EventLog._write` retries the batch one event at a time."""
    dialect = conn.dialect
    columns = SandboxEvent.__table__.columns
    convert = [(column.key, column.type._cached_bind_processor(dialect)) for column in columns]
    quote = dialect.identifier_preparer
    statement = (
        f"COPY {quote.format_table(SandboxEvent.__table__)} "
        f"({', '.join(quote.format_column(column) for column in columns)}) FROM STDIN"
    )
    raw = cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)
    with raw.cursor() as cursor, cursor.copy(statement) as copy:
        copy.write(_copy_payload(rows, convert, getattr(dialect, "_json_serializer", None) or json.dumps))


def _copy_payload(
    rows: list[dict[str, Any]], convert: list[tuple[str, Any]], dumps: Callable[[Any], str | bytes]
) -> bytes:
    """`rows` as COPY text-format lines, each value bound by its column's processor first. A JSON
    column's gives psycopg's `Json` wrapper, which psycopg would have serialized with the
    connection's JSON dumper, the engine's `json_serializer` (`dumps`)."""
    from psycopg.types.json import Json  # only with PostgreSQL

    lines = []
    for row in rows:
        fields = []
        for key, bind in convert:
            value = row[key] if bind is None else bind(row[key])
            if isinstance(value, Json):
                value = (value.dumps or dumps)(value.obj)
                if isinstance(value, bytes):
                    value = value.decode()
            fields.append(copy_field(value))
        lines.append("\t".join(fields))
    lines.append("")
    return "\n".join(lines).encode()


def listed_after(last: tuple[int, datetime, str] | None, ident: str, created_at: datetime) -> datetime:
    """The `created_at` of the next event: never before `last`'s, and after it on a tie that its id
    would not break.

    Event lists page by (`created_at`, `id`) (docs/api.md), so that order must be `seq` order. Ids are
    monotonic per process only, and another worker's clock may run ahead, so the id is kept (it was
    returned to the caller) and the time moves on by a millisecond when it has to.
    """
    if last is None:
        return created_at
    created_at = max(created_at, last[1])
    if created_at == last[1] and ident <= last[2]:
        created_at = last[1] + timedelta(milliseconds=1)
    return created_at
