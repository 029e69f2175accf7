"""The FHIR surface's part of the task-run view (`sandboxes/viewer.py`): a criterion whose
evidence names a resource (`Type/id`) is linked to the FHIR requests that wrote or returned it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.sandboxes.viewer import PreviewEvent, preview_json

__all__ = ["judged_events"]


def judged_events(evidence: Mapping[str, Any], events: Sequence[PreviewEvent]) -> list[str]:
    resource = evidence.get("resource")
    if not isinstance(resource, str) or "/" not in resource:
        return []
    return [event.id for event in events if event.type.startswith("fhir") and _mentions(event, resource)]


def _mentions(event: PreviewEvent, reference: str) -> bool:
    """Whether a FHIR event wrote or read `Type/id` (by its path or the resource it returned)."""
    resource_type, _, ident = reference.partition("/")
    path = event.path or ""
    if path.split("?")[0].rstrip("/").endswith(f"{resource_type}/{ident}"):
        return True
    if not event.response or ident not in event.response:  # cheap test before parsing
        return False
    body = preview_json(event.response)
    return isinstance(body, Mapping) and body.get("resourceType") == resource_type and body.get("id") == ident
