"""The portal's verbs (docs/sandboxes.md): list, get, create, patch, set, shared by REST, the web
pages and the `set_portal_row` scenario step, so all three write the same rows the same way.

Each takes the caller's connection (its transaction) and the playground. An agent's write
(`create_row`, `patch_row`: REST and web forms alike) first goes through the write gate
(`sandboxes/gate.py`: `SandboxClosed`, a 409, once the task run takes no writes), then takes the
portal store's write lock; the scenario step writes inside `start`, before the task run starts. Errors are the store's domain errors (`Invalid` names the field,
`NotFound`, `Conflict`), mapped to the error codes of docs/api.md once, by the service.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select

from assay.core.values import read_dotted
from assay.sandboxes.gate import admit_surface
from assay.sandboxes.payer import PayerDefinition, PayerDefinitionInvalid, parse_payer
from assay.sandboxes.portal import priorauth
from assay.sandboxes.portal.datasets import plan_seed
from assay.sandboxes.portal.store import (
    StoredRow,
    StoreHead,
    create_store,
    head,
    key_text,
    rows_of,
    version_values,
    write_row,
)
from assay.sandboxes.portal.tables import PortalVersion
from assay.sandboxes.x12.tables import X12Payer
from assay.store import BadRequest, Conflict, Invalid, NotFound
from assay.store.models import Sandbox

__all__ = [
    "RowPage",
    "create_row",
    "get_row",
    "list_rows",
    "open_store",
    "patch_row",
    "payer_for",
    "payer_names",
    "resolve_slug",
    "seed_portal",
    "set_row",
]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@dataclass(frozen=True, slots=True)
class RowPage:
    rows: list[dict[str, Any]]
    next: str | None
    prev: str | None
    limit: int


def seed_portal(conn: Connection, playground_id: str, datasets: Sequence[Mapping[str, Any]]) -> int:
    """Create the playground's portal store and load its `portal` datasets in order
    (docs/sandboxes.md); the store's last sequence number.

    The store is new and this transaction's alone, so the upserts are resolved here (a later row
    with an earlier row's key is a new version of it, as `set_row` would make it) and written
    with the store row in two statements, not three per row."""
    plan = plan_seed(datasets)
    versions: list[dict[str, Any]] = []
    row_of_key: dict[tuple[str, str, str | None], int] = {}
    rows = 0
    for slug, resource, row in plan.rows:
        key = plan.keys[slug][resource]
        if row.get(key) is None:
            row = {**row, key: _new_key(resource)}
        text = key_text(row[key])
        # What `rows_of` would match: a stored key value (no text, as for an object, matches the
        # earlier rows without one), never one with a NUL.
        matchable = bool(key) and (text is None or "\x00" not in text)
        found = row_of_key.get((slug, resource, text)) if matchable else None
        if found is None:
            found, rows = rows, rows + 1
            if matchable:
                row_of_key[(slug, resource, text)] = found
        key_value = text if key else None
        versions.append(
            version_values(playground_id, len(versions) + 1, found, slug, resource, key_value, row)
        )
    create_store(conn, playground_id, plan.keys, plan.payers, seq=len(versions), rows=rows)
    if versions:
        conn.execute(insert(PortalVersion), versions)
    return len(versions)


def open_store(conn: Connection, playground_id: str, *, lock: bool = False) -> StoreHead:
    store = head(conn, playground_id, lock=lock)
    if store is None:
        raise Conflict(f"playground {playground_id} has no portal")
    return store


def payer_for(conn: Connection, store: StoreHead, slug: str) -> PayerDefinition | None:
    """The payer a portal decides with: its dataset's `payer`, else the playground's `x12` payer
    (the clearinghouse's, read on this connection: a second one would wait on this transaction's
    SQLite write lock), else None (submissions stay `submitted`)."""
    raw = store.payers.get(slug)
    if raw is None:
        raw = _x12_definition(conn, store)
    if raw is None:
        return None
    try:
        return parse_payer(raw)
    except PayerDefinitionInvalid:  # stored past validation: the clearinghouse answers as no one too
        return None


def payer_names(conn: Connection, store: StoreHead) -> dict[str, str]:
    """Each portal's display name (its payer's `name`), for the web pages; not parsed per page."""
    x12: Any = None
    names = {}
    for slug in store.keys:
        raw = store.payers.get(slug)
        if raw is None:
            x12 = x12 if x12 is not None else (_x12_definition(conn, store) or {})
            raw = x12
        about = raw.get("payer") if isinstance(raw, dict) else None
        name = about.get("name") if isinstance(about, dict) else None
        names[slug] = str(name) if name else (slug or "Payer")
    return names


def _x12_definition(conn: Connection, store: StoreHead) -> Any:
    return conn.execute(
        select(X12Payer.definition)
        .join(Sandbox, Sandbox.id == X12Payer.sandbox_id)
        .where(Sandbox.playground_id == store.playground_id, Sandbox.type == "x12")
    ).scalar()


def resolve_slug(store: StoreHead, requested: str | None) -> str:
    """The portal a request means: `?portal=<slug>`, else the default portal, else the only one."""
    if requested:
        if requested not in store.keys:
            raise NotFound(f"portal {requested} not found; this playground has {_portals(store)}")
        return requested
    if "" in store.keys:
        return ""
    if len(store.keys) == 1:
        return next(iter(store.keys))
    raise BadRequest(
        f"this playground has several portals ({_portals(store)}): name one with ?portal=<slug>",
        {"portal": ["required when the playground has several portals"]},
    )


def _portals(store: StoreHead) -> str:
    return ", ".join(slug or "(default)" for slug in sorted(store.keys))


def _key_of(store: StoreHead, slug: str, resource: str) -> str:
    key = store.keys.get(slug, {}).get(resource)
    if key is None:
        raise NotFound(f"portal resource {resource} not found")
    return key


def list_rows(
    conn: Connection,
    store: StoreHead,
    slug: str,
    resource: str,
    filters: Sequence[tuple[str, str]],
    *,
    limit: int,
    cursor: str | None,
) -> RowPage:
    """Rows matching every `field=value` filter (dotted paths), newest first (lists in docs/api.md)."""
    _key_of(store, slug, resource)
    rows = [
        stored for stored in rows_of(conn, store.playground_id, slug, resource) if _passes(stored, filters)
    ]
    rows.reverse()
    start = 0
    if cursor:
        after, direction = _decode(cursor)
        if direction == "n":
            start = next((i for i, row in enumerate(rows) if row.row_no < after), len(rows))
        else:
            end = next((i for i, row in enumerate(rows) if row.row_no <= after), len(rows))
            start = max(0, end - limit)
    page = rows[start : start + limit]
    more = start + limit < len(rows)
    return RowPage(
        [row.row for row in page],
        _encode(page[-1].row_no, "n") if page and more else None,
        _encode(page[0].row_no, "p") if page and start > 0 else None,
        limit,
    )


def _passes(stored: StoredRow, filters: Sequence[tuple[str, str]]) -> bool:
    for path, wanted in filters:
        reading = read_dotted(stored.row, path)
        if not reading.found or _text(reading.actual) != wanted:
            return False
    return True


def _text(value: Any) -> str | None:
    """A row value as a query string would write it: text as is, `true`, `3`, `null`."""
    return value if isinstance(value, str) else json.dumps(value)


def _encode(row_no: int, direction: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"r": row_no, "d": direction}).encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[int, str]:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        row_no, direction = int(value["r"]), str(value["d"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise BadRequest("cursor is not one this API returned", {"cursor": ["invalid cursor"]}) from None
    if direction not in ("n", "p"):
        raise BadRequest("cursor is not one this API returned", {"cursor": ["invalid cursor"]})
    return row_no, direction


def get_row(conn: Connection, store: StoreHead, slug: str, resource: str, key: str) -> StoredRow:
    field = _key_of(store, slug, resource)
    for stored in rows_of(conn, store.playground_id, slug, resource, key=key):
        if key_text(stored.row.get(field)) == key:
            return stored
    raise NotFound(f"{resource} row with {field} {key} not found")


def create_row(
    conn: Connection, playground_id: str, slug: str | None, resource: str, body: Any
) -> dict[str, Any]:
    """Store a new row (201): key filled when absent, a prior-auth submission decided at once."""
    admit_surface(conn, playground_id, "portal")
    store = open_store(conn, playground_id, lock=True)
    slug = resolve_slug(store, slug)
    key = _key_of(store, slug, resource)
    row = _object(body)
    if resource == "prior_auth_requests":
        row = priorauth.submit(row, payer_for(conn, store, slug))
    if row.get(key) is None:
        row[key] = _new_key(resource)
    elif key_text(row[key]) in (None, ""):
        raise Invalid({key: ["a key value is a non-empty string or a number"]})
    text = key_text(row[key])
    if rows_of(conn, playground_id, slug, resource, key=text):
        raise Conflict(f"{resource} already has a row with {key} {text}", {key: [f"{text} is taken"]})
    write_row(conn, store, slug, resource, row, None)
    return row


def patch_row(
    conn: Connection, playground_id: str, slug: str | None, resource: str, key: str, body: Any
) -> dict[str, Any]:
    """Merge top-level fields into a row (docs/api.md: `null` clears); its key cannot change."""
    admit_surface(conn, playground_id, "portal")
    store = open_store(conn, playground_id, lock=True)
    slug = resolve_slug(store, slug)
    field = _key_of(store, slug, resource)
    stored = get_row(conn, store, slug, resource, key)
    changes = _object(body)
    if field in changes and key_text(changes[field]) != key:
        raise Invalid({field: [f"the key of a {resource} row cannot change"]})
    row = {**stored.row, **changes}
    if resource == "prior_auth_requests":
        row = priorauth.amend(stored.row, changes, payer_for(conn, store, slug))
    write_row(conn, store, slug, resource, row, stored.row_no)
    return row


def set_row(conn: Connection, playground_id: str, slug: str | None, resource: str, row: Any) -> None:
    """The `set_portal_row` scenario step (docs/sandboxes.md): replace the row with the same key, else add
    it. The row is stored as given — a scenario sets the world up, the payer decides nothing."""
    store = open_store(conn, playground_id, lock=True)
    slug = resolve_slug(store, slug)
    _key_of(store, slug, resource)
    _upsert(conn, store, slug, resource, _object(row))


def _upsert(
    conn: Connection, store: StoreHead, slug: str, resource: str, row: dict[str, Any]
) -> tuple[StoreHead, dict[str, Any]]:
    key = store.keys[slug][resource]
    if row.get(key) is None:
        row = {**row, key: _new_key(resource)}
    text = key_text(row[key])
    same = next(
        (
            s
            for s in rows_of(conn, store.playground_id, slug, resource, key=text)
            if key_text(s.row.get(key)) == text
        ),
        None,
    )
    return write_row(conn, store, slug, resource, row, same.row_no if same else None), row


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise Invalid({"": ["a portal row is a JSON object"]})
    return dict(body)


def _new_key(resource: str) -> str:
    prefix = "PA" if resource == "prior_auth_requests" else resource[:2].upper()
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(10))
