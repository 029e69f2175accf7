"""The CapabilityStatement `GET [base]/metadata` returns: what this server does (SPEC §5.2)."""

from __future__ import annotations

from functools import cache
from typing import Any

from assay.formats.fhir._search_parameters import SEARCH_PARAMETERS
from assay.formats.fhir.parameters import SUPPORTED_TYPES, resource_types

__all__ = ["capability_statement"]

_INTERACTIONS = [
    "read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create", "search-type",
]  # fmt: skip
_DOCUMENTATION = (
    "Assay playground store. Writes (create, update, patch, transaction and batch entries) are "
    "validated against R4 (fhir.resources R4B element models: structure, cardinality, primitive "
    "formats, required elements; references must be well formed): 400 OperationOutcome with "
    "issue.expression naming each element, unless the playground is lenient. Type and system "
    "_history list the versions the playground wrote, not the seeded dataset's. _include takes "
    "Type:parameter[:Target], Type:* and *; _revinclude takes Type:parameter[:Target]; both take "
    ":iterate. Chained parameters (several links), _has, token :text and :of-type, reference "
    ":identifier and composite parameters are supported."
)


@cache
def _resources() -> list[dict[str, Any]]:
    shared = SEARCH_PARAMETERS.get("Resource", {})
    out = []
    for kind in sorted(resource_types()):
        table = {**shared, **SEARCH_PARAMETERS.get(kind, {})}
        params = [
            {"name": code, "type": row[0]}
            for code, row in sorted(table.items())
            if row[0] in SUPPORTED_TYPES and row[1]
        ]
        out.append(
            {
                "type": kind,
                "interaction": [{"code": code} for code in _INTERACTIONS],
                "versioning": "versioned",
                "readHistory": True,
                "updateCreate": True,
                "conditionalCreate": True,
                "conditionalUpdate": True,
                "conditionalDelete": "single",
                "searchInclude": [
                    "*",
                    f"{kind}:*",
                    *(f"{kind}:{p['name']}" for p in params if p["type"] == "reference"),
                ],
                "searchParam": params,
            }
        )
    return out


def capability_statement(base: str) -> dict[str, Any]:
    return {
        "resourceType": "CapabilityStatement",
        "status": "active",
        "date": "2026-01-01",
        "kind": "instance",
        "software": {"name": "Assay embedded FHIR server"},
        "implementation": {"description": "Assay playground FHIR R4 store", "url": base},
        "fhirVersion": "4.0.1",
        "format": ["application/fhir+json", "application/json"],
        "patchFormat": ["application/json-patch+json"],
        "rest": [
            {
                "mode": "server",
                "documentation": _DOCUMENTATION,
                "resource": _resources(),
                "interaction": [{"code": "transaction"}, {"code": "batch"}, {"code": "history-system"}],
            }
        ],
    }
