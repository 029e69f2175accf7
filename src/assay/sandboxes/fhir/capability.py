"""The CapabilityStatement `GET [base]/metadata` returns: what this server does (docs/sandboxes.md).

Everything here is read from the code that does it, so the statement cannot claim more or less
than works: the parameters are the ones `formats/fhir` parses (`parse_search_key`, composites
included), includes and revincludes are every reference parameter, the operations are
`operations.OPERATIONS`, the modifiers the query parser's table, the compartments
`compartments.COMPARTMENTS`. `tests/sandboxes/fhir/test_capability.py` replays the claims
against a live server.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from assay.formats.fhir import UnknownSearchParameter
from assay.formats.fhir._search_parameters import SEARCH_PARAMETERS
from assay.formats.fhir.compartments import COMPARTMENTS
from assay.formats.fhir.parameters import reference_parameters, resource_types
from assay.formats.fhir.query import MODIFIERS, parse_search_key
from assay.sandboxes.fhir.operations import OPERATIONS

__all__ = ["INTERACTIONS", "capability_statement"]

INTERACTIONS = (
    "read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create", "search-type",
)  # fmt: skip
_DOCUMENTATION = (
    "Assay playground store. Writes (create, update, patch, transaction and batch entries) are "
    "validated against R4 (fhir.resources R4B element models: structure, cardinality, primitive "
    "formats, required elements; references must be well formed): 400 OperationOutcome with "
    "issue.expression naming each element, unless the playground is lenient. Type and system "
    "_history list the versions the playground wrote, not the seeded dataset's. _include takes "
    "Type:parameter[:Target], Type:* and *; _revinclude takes Type:parameter[:Target]; both take "
    ":iterate. Chained parameters (several links, with or without :Type), _has (nested), and "
    "composite parameters are supported; modifiers by parameter type: {modifiers}. _summary "
    "(true, text, data, count, false) and _elements mark results SUBSETTED. Prefer: return="
    "minimal|representation|OperationOutcome on writes, handling=lenient|strict on search. PATCH "
    "takes JSON Patch or FHIRPath Patch, also conditionally (PATCH [type]?criteria); POST [type]?"
    "criteria is a conditional create. Compartment search ([Compartment]/[id]/[type]) in the R4 "
    "compartments {compartments}."
)


def _documentation() -> str:
    modifiers = "; ".join(
        f"{kind}: {', '.join(sorted(names))}" for kind, names in sorted(MODIFIERS.items()) if names
    )
    return _DOCUMENTATION.format(modifiers=modifiers, compartments=", ".join(COMPARTMENTS))


def _compartment_url(code: str) -> str:
    # the base CompartmentDefinitions' ids are the code with a lower-case first letter (relatedPerson)
    return f"http://hl7.org/fhir/CompartmentDefinition/{code[0].lower()}{code[1:]}"


def _params(kind: str) -> list[dict[str, str]]:
    codes = sorted({*SEARCH_PARAMETERS.get("Resource", {}), *SEARCH_PARAMETERS.get(kind, {})})
    params = []
    for code in codes:
        try:
            parameter, _ = parse_search_key(kind, code)
        except UnknownSearchParameter:
            continue
        params.append({"name": code, "type": parameter.type})
    return params


@cache
def _resources() -> list[dict[str, Any]]:
    referring: dict[str, list[str]] = {}
    for kind in sorted(resource_types()):
        for parameter in reference_parameters(kind):
            for target in parameter.targets:
                referring.setdefault(target, []).append(f"{kind}:{parameter.code}")
    out = []
    for kind in sorted(resource_types()):
        resource: dict[str, Any] = {
            "type": kind,
            "interaction": [{"code": code} for code in INTERACTIONS],
            "versioning": "versioned",
            "readHistory": True,
            "updateCreate": True,
            "conditionalCreate": True,
            "conditionalUpdate": True,
            "conditionalDelete": "single",
            "searchInclude": ["*", f"{kind}:*", *(f"{kind}:{p.code}" for p in reference_parameters(kind))],
            "searchRevInclude": sorted(referring.get(kind, [])),
            "searchParam": _params(kind),
        }
        operations = [
            {"name": name, "definition": definition}
            for name, (types, _, definition) in OPERATIONS.items()
            if kind in types
        ]
        if operations:
            resource["operation"] = operations
        out.append(resource)
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
        "patchFormat": ["application/json-patch+json", "application/fhir+json"],
        "rest": [
            {
                "mode": "server",
                "documentation": _documentation(),
                "resource": _resources(),
                "interaction": [{"code": "transaction"}, {"code": "batch"}, {"code": "history-system"}],
                "compartment": [_compartment_url(code) for code in COMPARTMENTS],
            }
        ],
    }
