"""Validation of written resources: R4 structure, cardinality, primitive formats, required
elements and well-formed references (issue 15; R4 http.html "400 Bad Request … failed basic FHIR
validation rules").

Every version the REST surface writes passes `WriteTransaction.put`, which calls
`validate_resource` unless the playground is lenient (`settings.fhir.strict_validation: false` on
its environment, or `ASSAY_FHIR_LENIENT=1` on the server: the structural checks only, as before
issue 15). Dataset loading never validates (SPEC §5.1).

The element rules come from the fhir.resources R4B pydantic models (the closest model set the
package ships; its element names, cardinalities and primitive regexes match R4 for the resources
agents write). A type with no R4B model (R4's MedicinalProduct family, EffectEvidenceSynthesis …)
gets the reference check only. This is the one boundary where pydantic errors become FHIR: each
error is one OperationOutcome issue whose `expression` is the element's FHIRPath
(`Patient.name[0].family`) and whose `diagnostics` names it and the rule.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from assay.formats.fhir.parameters import is_resource_type
from assay.sandboxes.fhir.outcomes import FhirError

__all__ = [
    "LENIENT_ENV",
    "MAX_ISSUES",
    "repeats",
    "strict_available",
    "validate_resource",
    "validate_strict",
    "validation_issues",
]

MAX_ISSUES = 20
"""Issues reported per invalid resource (a broken bundle-sized resource would list thousands)."""
LENIENT_ENV = "ASSAY_FHIR_LENIENT"
"""`1` relaxes every playground's (and standalone store's) writes to the structural checks; read
once, by `service.settings` and by the standalone FHIR server's factory, never at use time."""

_ID = r"[A-Za-z0-9\-.]{1,64}"
_RELATIVE = re.compile(rf"^([A-Z][A-Za-z]+)/{_ID}(?:/_history/{_ID})?$")
_CONDITIONAL = re.compile(r"^([A-Z][A-Za-z]+)\?\S*$")
_ABSOLUTE = re.compile(r"^[a-z][a-z0-9+.\-]*://\S+$")
_URN = re.compile(r"^urn:(?:uuid:[0-9a-fA-F\-]{36}|oid:[0-2](?:\.(?:0|[1-9]\d*))+)$")
_CONTAINED = re.compile(rf"^#(?:{_ID})?$")


@cache
def strict_available() -> bool:
    """Whether the fhir.resources R4B models can be imported (a runtime dependency since issue 15)."""
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


def _issue(code: str, expression: str, message: str) -> dict[str, Any]:
    return {
        "severity": "error",
        "code": code,
        "diagnostics": f"{expression}: {message}",
        "expression": [expression],
    }


@cache
def _model(kind: str) -> Any:
    from fhir.resources.R4B import get_fhir_model_class

    try:
        return get_fhir_model_class(kind)
    except (KeyError, ValueError, AttributeError):  # R4 types R4B dropped: "not a valid FHIR Model"
        return None


_TYPE_NAME = re.compile(r"abc\.(\w+)Type")


def repeats(resource_type: str, names: Sequence[str]) -> bool:
    """Whether the element at `names` under `resource_type` (`["contact", "telecom"]`) is a list,
    per the R4B models (False when they do not say)."""
    model = _model(resource_type) if strict_available() else None
    for position, name in enumerate(names):
        if model is None:
            return False
        field = next((f for key, f in model.model_fields.items() if (f.alias or key) == name), None)
        if field is None:
            return False
        annotation = str(field.annotation)
        if position == len(names) - 1:
            return "List[" in annotation
        found = _TYPE_NAME.search(annotation)
        model = _model(found[1]) if found else None
    return False


def _model_issues(resource: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    from pydantic import ValidationError

    model = _model(kind) if strict_available() else None
    if model is None:
        return []
    try:
        model.model_validate(resource)
    except ValidationError as exc:
        return [
            _issue(
                "structure" if error.get("type") in ("extra_forbidden", "list_type") else "value",
                _expression(kind, error.get("loc", ())),
                str(error.get("msg", "invalid")),
            )
            for error in exc.errors()
        ]
    except (ValueError, TypeError) as exc:
        return [_issue("value", kind, str(exc))]
    return []


def _references(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(FHIRPath, text) of every `reference` string under `value`, in document order."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _references(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "reference" and isinstance(item, str):
                yield f"{path}.reference", item
            elif isinstance(item, dict | list) and key != "contained":
                yield from _references(item, f"{path}.{key}")


def _reference_problem(text: str) -> str | None:
    """Why `text` is not an R4 reference (R4 references.html: relative `Type/id[/_history/v]`,
    absolute URL, `urn:uuid:`/`urn:oid:`, `#id` to a contained resource, or a transaction's
    conditional `Type?criteria`), or None."""
    for pattern in (_RELATIVE, _CONDITIONAL):
        found = pattern.match(text)
        if found:
            kind = found[1]
            return None if is_resource_type(kind) else f"{kind} is not an R4 resource type"
    if _ABSOLUTE.match(text) or _URN.match(text) or _CONTAINED.match(text):
        return None
    return f"{text[:100]!r} is not a reference (expected Type/id, an absolute URL, urn:uuid:, or #id)"


def validation_issues(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """Every problem of `resource` as OperationOutcome issues (empty when it is valid)."""
    kind = str(resource.get("resourceType"))
    issues = _model_issues(resource, kind)
    for where, text in _references(resource, kind):
        problem = _reference_problem(text)
        if problem is not None:
            issues.append(_issue("value", where, problem))
    return issues


def validate_resource(resource: dict[str, Any], status: int = 400) -> None:
    """Raise `status` (400) naming every offending element when `resource` is not valid R4."""
    issues = validation_issues(resource)
    if not issues:
        return
    kind = str(resource.get("resourceType"))
    summary = "; ".join(issue["diagnostics"] for issue in issues[:3])
    if len(issues) > 3:
        summary += f"; and {len(issues) - 3} more"
    raise FhirError(status, f"{kind} is not a valid R4 resource: {summary}", issues=issues[:MAX_ISSUES])


def validate_strict(resource: dict[str, Any]) -> None:
    """`validate_resource`, kept under its issue-5 name for callers and tests."""
    validate_resource(resource)
