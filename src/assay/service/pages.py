"""List responses (docs/api.md): `{"data": [...], "_meta": {"next", "prev", "limit"}}`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select

from assay.store import paginate

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from assay.service.deps import PageQuery

__all__ = ["list_json"]


def list_json(
    session: Session,
    statement: Select[Any],
    model: Any,
    page: PageQuery,
    serialize: Callable[[Any], dict[str, Any]],
    *,
    newest_first: bool = True,
) -> dict[str, Any]:
    """The list response for one page of `statement` (already scoped by the caller): the body of
    every `GET /<things>` endpoint."""
    found = paginate(
        session, statement, model, limit=page.limit, cursor=page.cursor, newest_first=newest_first
    )
    return {
        "data": [serialize(item) for item in found.items],
        "_meta": {"next": found.next, "prev": found.prev, "limit": found.limit},
    }
