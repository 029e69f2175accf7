"""What the FHIR routes publish in OpenAPI: FHIR's own answers, not the API's envelope.

Every FHIR answer, errors included, is a resource in `application/fhir+json` (or `application/json`
when that is all the client accepts, `routes.py::_media_type`): an OperationOutcome for every
error, whatever refused the request (the run token, the task run's state, a saturated database:
`routes.py::_FhirRoute`). `FHIR_ERRORS` is attached to the router, so a new interaction documents
them by itself; each route adds its success answers with `answers(...)`. The schemas are loose on
purpose (a resource is an object with a `resourceType`): R4's own schemas are the validator's
business (`validation.py`); these tell a client which shape comes back, and schemathesis checks
every answer against them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FHIR_ERRORS", "FHIR_SCHEMAS", "answers"]

FHIR_JSON = "application/fhir+json"
_REF = "#/components/schemas/{}"

FHIR_SCHEMAS: dict[str, dict[str, Any]] = {
    "FhirResource": {
        "title": "FhirResource",
        "description": "Any FHIR R4 resource (JSON): its `resourceType` says which.",
        "type": "object",
        "required": ["resourceType"],
        "properties": {"resourceType": {"type": "string"}, "id": {"type": "string"}},
    },
    "FhirBundle": {
        "title": "FhirBundle",
        "description": "A Bundle: a searchset, a history, or a batch/transaction response.",
        "type": "object",
        "required": ["resourceType", "type"],
        "properties": {
            "resourceType": {"type": "string", "enum": ["Bundle"]},
            "type": {"type": "string"},
            "total": {"type": "integer"},
            "link": {"type": "array", "items": {"type": "object"}},
            "entry": {"type": "array", "items": {"type": "object"}},
        },
    },
    "FhirCapabilityStatement": {
        "title": "FhirCapabilityStatement",
        "description": "What this server supports (R4 `metadata`).",
        "type": "object",
        "required": ["resourceType"],
        "properties": {"resourceType": {"type": "string", "enum": ["CapabilityStatement"]}},
    },
    "OperationOutcome": {
        "title": "OperationOutcome",
        "description": "Every FHIR error: one issue or more, each with a severity, a code and a diagnostic.",
        "type": "object",
        "required": ["resourceType", "issue"],
        "properties": {
            "resourceType": {"type": "string", "enum": ["OperationOutcome"]},
            "issue": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["severity", "code"],
                    "properties": {
                        "severity": {"type": "string", "enum": ["fatal", "error", "warning", "information"]},
                        "code": {"type": "string"},
                        "diagnostics": {"type": "string"},
                    },
                },
            },
        },
    },
}


def _content(schema: str) -> dict[str, Any]:
    ref = {"schema": {"$ref": _REF.format(schema)}}
    return {FHIR_JSON: ref, "application/json": ref}


_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}
}

_ERRORS: tuple[tuple[int, str], ...] = (
    (400, "A malformed body, parameter or header"),
    (401, "No run token, or one that is unknown or expired"),
    (403, "A token that may not use the sandbox surfaces"),
    (404, "No such resource, version or task run (or outside the token's run)"),
    (405, "No interaction takes this method at this path (`Allow` lists those that do)"),
    (406, "The client accepts neither application/fhir+json nor application/json"),
    (409, "A version conflict, or a task run that has ended or is not started"),
    (410, "The resource was deleted"),
    (412, "`If-Match` names another version, or a conditional interaction matched several"),
    (413, "A resource over 5 MB or a bundle over 50 MB"),
    (415, "A body in a format this interaction does not read"),
    (422, "A resource that fails FHIR validation (one issue per element)"),
    (429, "The run token spent its request budget"),
    (502, "The external FHIR server (`ASSAY_FHIR_URL`) failed"),
    (503, "The server is saturated; retry after `Retry-After`"),
)

FHIR_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": description,
        "content": _content("OperationOutcome"),
        **({"headers": _RETRY_AFTER} if status in (429, 503) else {}),
    }
    for status, description in _ERRORS
}
"""Every error a FHIR route can answer, each an OperationOutcome (attached to the router)."""

_EMPTY = (204,)


def answers(schema: str, *statuses: int, description: str = "Success") -> dict[int | str, dict[str, Any]]:
    """A route's success answers: `statuses` (200 when none) with `schema` (a `FHIR_SCHEMAS` name);
    204 has no body. `Prefer: return=minimal` empties a write's body whatever its status."""
    documented: dict[int | str, dict[str, Any]] = {}
    for status in statuses or (200,):
        documented[status] = {"description": description}
        if status not in _EMPTY:
            documented[status]["content"] = _content(schema)
    return documented
