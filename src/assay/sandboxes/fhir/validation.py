"""Validation of written resources: R4 structure, cardinality, primitive formats, required
elements and well-formed references (R4 http.html "400 Bad Request … failed basic FHIR
validation rules").

Every version the REST surface writes passes `WriteTransaction.put`, which calls
`validate_resource` unless the playground is lenient (`settings.fhir.strict_validation: false` on
its environment, or `ASSAY_FHIR_LENIENT=1` on the server: the structural checks only). Dataset loading never
validates (docs/sandboxes.md).

The element rules come from the fhir.resources R4B pydantic models (the closest model set the
package ships; its element names, cardinalities and primitive regexes match R4 for the resources
agents write). A type with no R4B model (R4's MedicinalProduct family, EffectEvidenceSynthesis …)
gets the reference check only. This is the one boundary where pydantic errors become FHIR: each
error is one OperationOutcome issue whose `expression` is the element's FHIRPath
(`Patient.name[0].family`) and whose `diagnostics` names it and the rule.

Two gaps of the models are closed by a walk of the JSON beside them (`_json_issues`). pydantic
validates in lax mode, so `"active": "yes"`, `"multipleBirthInteger": "2"` or a decimal sent as
a string passed and were stored, and a strict reader of the stored resource (SMART's fhirclient)
then refused it, and with it every search answer that held it: the walk holds each primitive to
its JSON type (R4 json.html). And a model checks its required primitives (`Observation.status`)
and its one-of-many choices only after every element validated, so a resource with another
problem got only that one reported: the walk checks them everywhere, so one answer lists every
problem.
"""

from __future__ import annotations

import datetime
import decimal
import importlib.util
import re
import types
import typing
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
    """Whether the fhir.resources R4B models can be imported (a runtime dependency)."""
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
                _ISSUE_CODES.get(str(error.get("type")), "value"),
                _expression(kind, error.get("loc", ())),
                _REQUIRED if error.get("type") == "missing" else str(error.get("msg", "invalid")),
            )
            for error in exc.errors()
            if not _walked(error)
        ]
    except (ValueError, TypeError) as exc:
        return [_issue("value", kind, str(exc))]
    return []


_REQUIRED = "a required element is missing"
_ISSUE_CODES = {"extra_forbidden": "structure", "list_type": "structure", "missing": "required"}
"""pydantic error type → OperationOutcome issue code (R4 valueset-issue-type); else `value`."""


def _walked(error: Any) -> bool:
    """Whether a model error is one `_json_issues` reports itself, at every depth: a required
    primitive missing, or a choice (`value[x]`) given twice or not at all."""
    if error.get("type") == "model_field_validation.missing":
        return True
    message = str(error.get("msg", ""))
    return error.get("type") == "value_error" and (
        "Any of one field value is expected" in message or "Expect any of field value from" in message
    )


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


_JSON_TYPES: dict[Any, tuple[tuple[type, ...], str]] = {
    bool: ((bool,), "a JSON boolean (true or false)"),
    int: ((int,), "a JSON integer"),
    decimal.Decimal: ((int, float, decimal.Decimal), "a JSON number"),
}
"""A primitive's Python type in the models → the JSON values R4 allows for it; every other
primitive (string, code, uri, date, dateTime, instant, time, base64Binary, …) is a JSON string."""


@dataclass(frozen=True, slots=True)
class _Element:
    name: str
    """The JSON name (the model field's alias)."""
    repeats: bool
    model: str | None
    """The complex type (`CodeableConcept`, `Resource` for any resource); None for a primitive."""
    json: tuple[tuple[type, ...], str] | None
    """The JSON values a primitive may take, and how to say so; None for a complex type."""


def _annotation_parts(annotation: Any) -> tuple[bool, Any]:
    """(repeats, the one non-None type) of a model field's annotation."""
    repeats = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Union or origin is types.UnionType:
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:  # `url`: AnyUrl or str, both a JSON string
                return repeats, str
            annotation = options[0]
        elif origin is list:
            repeats, annotation = True, typing.get_args(annotation)[0]
        else:
            return repeats, annotation


@cache
def _elements(kind: str) -> tuple[dict[str, _Element], tuple[tuple[str, str | None], ...], dict[str, Any]]:
    """A model's elements by JSON name, its required primitives (name, `_name`) and its choices
    (`value` → the JSON names of `value[x]`, and whether one is required)."""
    model = _model(kind)
    if model is None:
        return {}, (), {}
    elements: dict[str, _Element] = {}
    by_field: dict[str, str] = {}
    for key, field in model.model_fields.items():
        name = field.alias or key
        by_field[key] = name
        if name == "fhir_comments":
            continue
        repeats, base = _annotation_parts(field.annotation)
        if isinstance(base, type) and base.__module__ == "abc":  # fhir.resources' `CodeableConceptType`
            elements[name] = _Element(name, repeats, base.__name__.removesuffix("Type"), None)
        elif base in (datetime.date, datetime.datetime, datetime.time, bytes, str, uuid.UUID):
            elements[name] = _Element(name, repeats, None, ((str,), "a JSON string"))
        else:
            elements[name] = _Element(name, repeats, None, _JSON_TYPES.get(base, ((str,), "a JSON string")))
    required = tuple(
        (by_field.get(name, name), by_field.get(ext) if ext else None)
        for name, ext in model.get_required_fields(None)  # a constant list, per class
    )
    choices: dict[str, Any] = {}
    for prefix, fields in model.get_one_of_many_fields(None).items():
        extra = model.model_fields[fields[0]].json_schema_extra or {}
        choices[prefix] = ([by_field.get(f, f) for f in fields], extra.get("one_of_many_required") is True)
    return elements, required, choices


def _json_issues(value: dict[str, Any], kind: str, path: str) -> Iterator[dict[str, Any]]:
    """Primitives of the wrong JSON type, required primitives missing and choices broken, at any
    depth of `value` (an element of type `kind`); unknown elements are the models' to report."""
    elements, required, choices = _elements(kind)
    for name, sibling in required:
        if value.get(name) is None and not (sibling and isinstance(value.get(sibling), dict)):
            yield _issue("required", f"{path}.{name}", _REQUIRED)
    for prefix, (names, needed) in choices.items():
        present = [name for name in names if value.get(name) is not None]
        if len(present) > 1:
            yield _issue("structure", f"{path}.{prefix}[x]", f"only one of {', '.join(present)} may be given")
        elif needed and not present:
            yield _issue("required", f"{path}.{prefix}[x]", _REQUIRED)
    for name, item in value.items():
        element = elements.get(name)
        if element is None or item is None:
            continue
        if element.repeats:
            if isinstance(item, list):  # not a list: the models say so
                for i, each in enumerate(item):
                    yield from _json_item(element, each, f"{path}.{name}[{i}]")
        else:
            yield from _json_item(element, item, f"{path}.{name}")


def _json_item(element: _Element, item: Any, path: str) -> Iterator[dict[str, Any]]:
    if item is None:  # a repeating primitive's place holder beside its `_name` extensions
        return
    if element.json is not None:
        allowed, says = element.json
        if not isinstance(item, allowed) or (isinstance(item, bool) and bool not in allowed):
            yield _issue("value", path, f"{_clip(item)} is not {says}")
    elif isinstance(item, dict):  # not an object: the models say so
        kind = element.model
        if kind == "Resource":  # `contained`, `Bundle.entry.resource`: the type the JSON names
            named = item.get("resourceType")
            if not (isinstance(named, str) and is_resource_type(named)):
                return
            kind = named
        if kind is not None:
            yield from _json_issues(item, kind, path)


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validation_issues(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """Every problem of `resource` as OperationOutcome issues (empty when it is valid)."""
    kind = str(resource.get("resourceType"))
    issues = _model_issues(resource, kind)
    if strict_available() and _model(kind) is not None:
        reported = {expression for issue in issues for expression in issue["expression"]}
        for issue in _json_issues(resource, kind, kind):
            if issue["expression"][0] not in reported:  # the models' word stands where both speak
                reported.add(issue["expression"][0])
                issues.append(issue)
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
