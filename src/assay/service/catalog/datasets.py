"""Dataset bodies by type (SPEC §5.1), checked at create so a bad one is a 422 naming the key.

A type a live surface loads is checked by that surface (`Surface.validate_dataset`); the shape
checks below stand in for types whose surface has not landed yet (a start with them still fails
with `dataset type <t> is not supported`), and go away as each surface takes its type over.
"""

from __future__ import annotations

from typing import Any

from assay.sandboxes import dataset_problems
from assay.store import Invalid

__all__ = ["check_dataset"]


def _files(data: dict[str, Any]) -> dict[str, list[str]]:
    files = data.get("files")
    if not isinstance(files, list):
        return {"data.files": ["must be an array of {path, content | content_base64}"]}
    errors: dict[str, list[str]] = {}
    for i, item in enumerate(files):
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            errors[f"data.files.{i}.path"] = ["must be a string"]
        elif not isinstance(item.get("content", item.get("content_base64")), str):
            errors[f"data.files.{i}.content"] = ["content or content_base64 must be a string"]
    return errors


_CHECKS = {
    "files": _files,
}


def check_dataset(kind: str, data: dict[str, Any]) -> None:
    """`Invalid` (422) keyed by the bad `data.<path>`, for a create and a PATCH of `data` alike."""
    errors = dataset_problems(kind, data)
    if errors is None:
        errors = _CHECKS[kind](data) if kind in _CHECKS else {}
    if errors:
        raise Invalid(errors)
