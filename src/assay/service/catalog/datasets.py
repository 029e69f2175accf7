"""Dataset bodies by type (docs/api.md), checked at create so a bad one is a 422 naming the key.

Every type is checked by the surface that loads it (`Surface.validate_dataset`); a type no live
surface loads is refused when it is named (the dataset schema's `type`), and a start with one
fails with `dataset type <t> is not supported`.
"""

from __future__ import annotations

from typing import Any

from assay.sandboxes import dataset_problems
from assay.store import Invalid

__all__ = ["check_dataset"]


def check_dataset(kind: str, data: dict[str, Any]) -> None:
    """`Invalid` (422) keyed by the bad `data.<path>`, for a create and a PATCH of `data` alike."""
    errors = dataset_problems(kind, data)
    if errors:
        raise Invalid(errors)
