"""The `Prefer` request header (R4 http.html §3.1.0.1.9 and search.html "Handling errors").

- `return=minimal | representation | OperationOutcome` on create, update and patch: no body, the
  resource (the default), or an OperationOutcome about the outcome; status and headers
  (`Location`, `ETag`, `Last-Modified`) are the same either way.
- `handling=strict | lenient` on search: strict (the default, as HAPI) answers 400 for a parameter
  it does not know or support; lenient drops it, and the `self` link shows only what was used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from assay.sandboxes.fhir.outcomes import operation_outcome

if TYPE_CHECKING:
    from assay.sandboxes.fhir.results import FhirResult

__all__ = ["Prefer", "parse_prefer", "shape_write"]

_RETURNS = frozenset({"minimal", "representation", "OperationOutcome"})


@dataclass(frozen=True, slots=True)
class Prefer:
    returns: str = "representation"
    lenient: bool = False


def parse_prefer(header: str | None) -> Prefer:
    """The preferences this server honours; unknown or malformed ones are ignored (RFC 7240: a
    preference is a hint, never an error)."""
    returns, lenient = "representation", False
    for item in (header or "").split(","):
        name, _, value = (part.strip() for part in item.split(";")[0].partition("="))
        value = value.strip('"')
        if name.lower() == "return" and value in _RETURNS:
            returns = value
        elif name.lower() == "handling" and value in ("lenient", "strict"):
            lenient = value == "lenient"
    return Prefer(returns, lenient)


def shape_write(result: FhirResult, prefer: Prefer) -> FhirResult:
    """A create/update/patch answer shaped by `return=`, with `Preference-Applied` saying so."""
    if result.body is None or prefer.returns == "representation" or result.status >= 300:
        return result
    headers = {**result.headers, "Preference-Applied": f"return={prefer.returns}"}
    if prefer.returns == "minimal":
        return replace(result, body=None, headers=headers)
    kind, rid = result.body.get("resourceType"), result.body.get("id")
    verb = "created" if result.status == 201 else "updated"
    outcome = operation_outcome(f"{kind}/{rid} {verb}", "informational", "information")
    return replace(result, body=outcome, headers=headers)
