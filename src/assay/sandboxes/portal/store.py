"""The portal rows store: rows per resource and portal slug, versioned, captured as a pointer.

Every function takes the caller's `Connection`, so seeding runs inside `start`'s transaction and a
request's write commits with it. Writers of one playground take turns on its `portal_stores` row
(`FOR UPDATE` on PostgreSQL; SQLite's `BEGIN IMMEDIATE` already serializes), so sequence numbers
and row numbers never race. Reading "rows as of seq N" folds the version rows: per `row_no` the
last version at or before N, in `row_no` (insertion) order — the recency order of docs/snapshots.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, insert, select, update

from assay.core.state import PortalRow
from assay.sandboxes.portal.tables import PortalStoreRow, PortalVersion
from assay.store import utcnow

__all__ = [
    "BUILT_IN_KEYS",
    "StoreHead",
    "StoredRow",
    "capture_seq",
    "create_store",
    "head",
    "key_text",
    "rows_at",
    "rows_of",
    "version_values",
    "write_row",
]

BUILT_IN_KEYS = {"patients": "member_id", "providers": "npi", "prior_auth_requests": "request_id"}
"""The resources every portal has, and the key of each."""


@dataclass(frozen=True, slots=True)
class StoredRow:
    """The current version of one row."""

    row_no: int
    seq: int
    slug: str
    resource: str
    row: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoreHead:
    """A playground's portal store row, read under its write lock (or plainly, for reads)."""

    playground_id: str
    seq: int
    rows: int
    keys: dict[str, dict[str, str]]
    """`{slug: {resource: key}}`; the empty slug is the default portal."""
    payers: dict[str, Any]
    failed_logins: int
    locked_until: Any


def key_text(value: Any) -> str | None:
    """How a key value is stored and looked up: a string as is, a number as its JSON text.

    `GET portal/{resource}/{key}` compares the path segment with this text.
    """
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    return value if isinstance(value, str) else json.dumps(value)


def create_store(
    conn: Connection,
    playground_id: str,
    keys: Mapping[str, Mapping[str, str]],
    payers: Mapping[str, Any],
    *,
    seq: int = 0,
    rows: int = 0,
) -> None:
    """The store row; `seq` and `rows` count the versions written with it (seeding)."""
    conn.execute(
        insert(PortalStoreRow).values(
            playground_id=playground_id,
            seq=seq,
            rows=rows,
            keys={slug: dict(by_resource) for slug, by_resource in keys.items()},
            payers=dict(payers),
            failed_logins=0,
            locked_until=None,
            created_at=utcnow(),
        )
    )


def head(conn: Connection, playground_id: str, *, lock: bool = False) -> StoreHead | None:
    """The store row of a playground, None when it has no portal store; `lock` takes its write lock."""
    statement = select(PortalStoreRow).where(PortalStoreRow.playground_id == playground_id)
    if lock:
        statement = statement.with_for_update()
    found = conn.execute(statement).first()
    if found is None:
        return None
    return StoreHead(
        playground_id=found.playground_id,
        seq=found.seq,
        rows=found.rows,
        keys=found.keys or {},
        payers=found.payers or {},
        failed_logins=found.failed_logins,
        locked_until=found.locked_until,
    )


def version_values(
    playground_id: str,
    seq: int,
    row_no: int,
    slug: str,
    resource: str,
    key_value: str | None,
    row: Mapping[str, Any],
) -> dict[str, Any]:
    """One `portal_versions` row: version `seq` of row `row_no`."""
    return {
        "playground_id": playground_id,
        "seq": seq,
        "row_no": row_no,
        "slug": slug,
        "resource": resource,
        "key_value": key_value,
        "body": json.dumps(row, ensure_ascii=False, separators=(",", ":")),
    }


def write_row(
    conn: Connection, store: StoreHead, slug: str, resource: str, row: Mapping[str, Any], row_no: int | None
) -> StoreHead:
    """Append a version of a row (a new row when `row_no` is None); the store as it is afterwards.

    The caller holds the store's write lock (`head(..., lock=True)`) and passes the head it read.
    """
    seq = store.seq + 1
    rows = store.rows
    if row_no is None:
        row_no, rows = rows, rows + 1
    key = store.keys.get(slug, {}).get(resource)
    key_value = key_text(row.get(key)) if key else None
    conn.execute(
        insert(PortalVersion).values(
            version_values(store.playground_id, seq, row_no, slug, resource, key_value, row)
        )
    )
    conn.execute(
        update(PortalStoreRow)
        .where(PortalStoreRow.playground_id == store.playground_id)
        .values(seq=seq, rows=rows)
    )
    return StoreHead(
        store.playground_id, seq, rows, store.keys, store.payers, store.failed_logins, store.locked_until
    )


def rows_of(
    conn: Connection,
    playground_id: str,
    slug: str,
    resource: str,
    *,
    at_seq: int | None = None,
    key: str | None = None,
) -> list[StoredRow]:
    """Current rows of one resource of one portal, in insertion order; with `key`, only the rows
    whose key value (`key_text`) is that — every version of a row has its key, which never changes.
    A key with a NUL matches nothing (bodies holding one are refused), on PostgreSQL too, whose
    `text` cannot even be compared with one."""
    if key is not None and "\x00" in key:
        return []
    statement = select(PortalVersion).where(
        PortalVersion.playground_id == playground_id,
        PortalVersion.slug == slug,
        PortalVersion.resource == resource,
    )
    if key is not None:
        statement = statement.where(PortalVersion.key_value == key)
    return _fold(conn, statement, at_seq)


def rows_at(conn: Connection, playground_id: str, seq: int) -> list[PortalRow]:
    """Every row of the playground as of `seq` (a capture), for `SandboxState.portal_rows`.

    `PortalRow.seq` is the row's position within its resource of its portal, as the snapshot
    reader numbers the rows of one `portal/<resource>.json`.
    """
    statement = select(PortalVersion).where(PortalVersion.playground_id == playground_id)
    positions: dict[tuple[str, str], int] = {}
    found = []
    for stored in _fold(conn, statement, seq):
        where = (stored.slug, stored.resource)
        position = positions.get(where, 0)
        positions[where] = position + 1
        found.append(PortalRow(position, stored.resource, stored.row, stored.slug or None))
    return found


def capture_seq(playground_id: str) -> Select[int]:
    """The pointer of a capture: the last sequence number written, read under the store's write
    lock (no row: the playground has no portal store)."""
    return select(PortalStoreRow.seq).where(PortalStoreRow.playground_id == playground_id).with_for_update()


def _fold(conn: Connection, statement: Any, at_seq: int | None) -> list[StoredRow]:
    if at_seq is not None:
        statement = statement.where(PortalVersion.seq <= at_seq)
    latest: dict[int, StoredRow] = {}
    for version in conn.execute(statement.order_by(PortalVersion.seq)):
        latest[version.row_no] = StoredRow(
            version.row_no, version.seq, version.slug, version.resource, json.loads(version.body)
        )
    return [latest[row_no] for row_no in sorted(latest)]
