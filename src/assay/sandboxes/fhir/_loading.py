"""Dataset loading (docs/sandboxes.md): the formats engine's `BundleLoader`, dataset after dataset."""

from __future__ import annotations

from typing import Any

__all__ = ["as_bundle"]


def as_bundle(data: Any) -> dict[str, Any] | None:
    """The Bundle a dataset loads: itself, a single resource wrapped in a collection Bundle, or
    None for anything that is not a JSON object (docs/sandboxes.md: never a rejected dataset)."""
    if not isinstance(data, dict):
        return None
    if data.get("resourceType") != "Bundle":
        return {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": data}]}
    return data
