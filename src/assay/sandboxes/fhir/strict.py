"""Optional strict validation of written resources against the fhir.resources R4B models.

The issue-5 contract: writes are always checked structurally (`resources.check_resource`); a
playground whose environment sets `settings.fhir.strict_validation: true` (or a server started
with `ASSAY_FHIR_STRICT=1`) also validates every stored version against the pydantic models of
`fhir.resources` (the `strict` extra). R4B is the closest R4 model set the package ships; its
element names and cardinalities match R4 for the resources agents write.

This is the one boundary where fhir.resources/pydantic errors become FHIR: each error is one
OperationOutcome issue whose `expression` is the element's FHIRPath (`Patient.name[0].family`)
and whose `diagnostics` names it and the rule (SPEC §5.2: 422 invalid resource).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from functools import cache
from typing import Any

from assay.sandboxes.fhir.outcomes import FhirError

__all__ = ["MAX_ISSUES", "strict_available", "validate_strict"]

MAX_ISSUES = 20
"""Issues reported per invalid resource (a broken bundle-sized resource would list thousands)."""


@cache
def strict_available() -> bool:
    """Whether the fhir.resources R4B models can be imported (the `strict` extra is installed)."""
    try:
        return importlib.util.find_spec("fhir.resources.R4B") is not None
    except ModuleNotFoundError:
        return False


def _expression(resource_type: str, location: Sequence[int | str]) -> str:
    """A pydantic error location as FHIRPath: ('name', 0, 'family') -> Patient.name[0].family."""
    text = resource_type
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part and not str(part).startswith(("function-", "json-or-python", "union[")):
            text += f".{part}"
    return text


def validate_strict(resource: dict[str, Any]) -> None:
    """Raise 422 naming every offending element when `resource` does not fit its R4B model."""
    if not strict_available():
        raise FhirError(
            500, "strict validation is on but fhir.resources is not installed (pip install assay[strict])"
        )
    from fhir.resources.R4B import get_fhir_model_class
    from pydantic import ValidationError

    kind = str(resource.get("resourceType"))
    try:
        model = get_fhir_model_class(kind)
    except KeyError:
        raise FhirError(422, f"resourceType {kind} has no R4B model to validate against") from None
    try:
        model.model_validate(resource)
    except ValidationError as exc:
        issues: list[dict[str, Any]] = []
        messages: list[str] = []
        for error in exc.errors()[:MAX_ISSUES]:
            expression = _expression(kind, error.get("loc", ()))
            messages.append(f"{expression}: {error.get('msg', 'invalid')}")
            issues.append(
                {
                    "severity": "error",
                    "code": "structure" if error.get("type") == "extra_forbidden" else "value",
                    "diagnostics": messages[-1],
                    "expression": [expression],
                }
            )
        summary = "; ".join(messages[:3])
        more = exc.error_count() - 3
        if more > 0:
            summary += f"; and {more} more"
        raise FhirError(422, f"{kind} is not a valid R4 resource: {summary}", issues=issues) from None
    except (ValueError, TypeError) as exc:
        raise FhirError(422, f"{kind} is not a valid R4 resource: {exc}") from None
