"""SPEC §5.1 dataset loading: the formats engine's `resources_from_bundle`, dataset after dataset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from assay.formats.fhir import resources_from_bundle

__all__ = ["load_bundle"]


def load_bundle(bundle: Any, loaded: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The resources `bundle` seeds; conditional references may resolve to `loaded` ones.

    A dataset that is a single resource rather than a Bundle seeds that resource; anything that
    is not a JSON object seeds nothing (SPEC §5.1: never a rejected dataset).
    """
    if not isinstance(bundle, dict):
        return []
    if bundle.get("resourceType") != "Bundle":
        bundle = {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": bundle}]}
    return resources_from_bundle(bundle, loaded)
