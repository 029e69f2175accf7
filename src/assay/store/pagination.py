"""Cursor pagination (docs/api.md): newest first by (`created_at`, `id`); event lists oldest first.

A cursor is opaque to clients: base64url of `{"c": created_at, "i": id, "d": "n"|"p"}`, the key of
the row it continues from and the direction. Keyset pagination stays correct while rows are added.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import Session

from assay.store.errors import BadRequest
from assay.store.ids import iso

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "Page", "clamp_limit", "paginate"]

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next: str | None
    prev: str | None
    limit: int


def clamp_limit(raw: str | None) -> int:
    """`?limit=` clamped to 1..100 (default 20); anything but an integer is a 400."""
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(
            f"limit must be an integer, got {raw!r}", {"limit": ["must be an integer"]}
        ) from None
    return max(1, min(MAX_LIMIT, value))


def _encode(row: Any, direction: str) -> str:
    payload = json.dumps({"c": iso(row.created_at), "i": row.id, "d": direction}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[datetime, str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        created = datetime.fromisoformat(data["c"].replace("Z", "+00:00"))
        ident, direction = str(data["i"]), data["d"]
        if direction not in ("n", "p"):
            raise ValueError(direction)
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise BadRequest(
            "cursor is not valid; use a cursor from a previous page", {"cursor": ["invalid"]}
        ) from None
    return created, ident, direction


def paginate(
    session: Session,
    statement: Select[Any],
    model: Any,
    *,
    limit: int,
    cursor: str | None,
    newest_first: bool = True,
) -> Page[Any]:
    """One page of `statement` (already scoped by the caller) in keyset order."""
    created_col, id_col = model.created_at, model.id
    forward = True
    if cursor:
        created, ident, direction = _decode(cursor)
        forward = direction == "n"
        after = forward == newest_first  # rows "below" the key in the requested order
        if after:
            statement = statement.where(
                or_(created_col < created, and_(created_col == created, id_col < ident))
            )
        else:
            statement = statement.where(
                or_(created_col > created, and_(created_col == created, id_col > ident))
            )
    descending = newest_first == forward
    order = (created_col.desc(), id_col.desc()) if descending else (created_col.asc(), id_col.asc())
    rows = list(session.scalars(statement.order_by(*order).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    if not forward:
        rows.reverse()
    if not rows:
        return Page([], None, None, limit)
    if forward:
        next_cursor = _encode(rows[-1], "n") if more else None
        prev_cursor = _encode(rows[0], "p") if cursor else None
    else:
        next_cursor = _encode(rows[-1], "n")
        prev_cursor = _encode(rows[0], "p") if more else None
    return Page(rows, next_cursor, prev_cursor, limit)
