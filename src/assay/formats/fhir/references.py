"""Reading FHIR references: `Type/id`, absolute URLs, `_history`, `urn:uuid:` (docs/assertions.md,
docs/sandboxes.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ReferenceTarget", "parse_reference", "reference_type"]

_TYPE_ID = re.compile(r"(?:^|/)([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})(?:/_history/[^/]+)?/?$")


@dataclass(frozen=True, slots=True)
class ReferenceTarget:
    """What a reference string points at: `Type/id` when it has that shape, else just `raw`."""

    raw: str
    type: str | None = None
    id: str | None = None

    @property
    def local(self) -> str | None:
        """`Type/id`, the form search compares (an absolute URL's tail, `_history` dropped)."""
        return f"{self.type}/{self.id}" if self.type and self.id else None


def parse_reference(text: str) -> ReferenceTarget:
    """`Patient/1`, `http://x/fhir/Patient/1/_history/2` → (Patient, 1); `urn:uuid:…` stays raw."""
    text = text.strip()
    if "?" in text or text.startswith(("urn:", "#")):
        return ReferenceTarget(text)
    match = _TYPE_ID.search(text)
    if match is None:
        return ReferenceTarget(text)
    return ReferenceTarget(text, match[1], match[2])


def reference_type(reference: Any) -> str | None:
    """The type a `Reference` points at: from its `reference` text, else its `type` element."""
    if not isinstance(reference, dict):
        return None
    text = reference.get("reference")
    if isinstance(text, str):
        found = parse_reference(text).type
        if found:
            return found
    kind = reference.get("type")
    return kind if isinstance(kind, str) else None
