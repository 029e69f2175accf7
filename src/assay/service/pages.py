"""List responses (SPEC §5): `{"data": [...], "_meta": {"next", "prev", "limit"}}`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.store import Page

__all__ = ["page_json"]


def page_json(page: Page[Any], serialize: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    return {
        "data": [serialize(item) for item in page.items],
        "_meta": {"next": page.next, "prev": page.prev, "limit": page.limit},
    }
