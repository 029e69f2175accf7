"""`fhir-resource-state`: a FHIR search returns a resource whose fields hold (docs/assertions.md).

Candidates are `state.fhir_search(resource_type, search)`: every match, all pages, in recency
order or `_sort` order, capped by `_count`. `match` picks one (checks/_select.py). A field reads
by dotted `path` (`participant.0.actor.display`) or by a FHIRPath expression, compiled once per
process; a FHIRPath that fails on a resource fails that field with the reason.

Bad input never raises out of here: an unknown search parameter is `unsupported assertion:
unknown search parameter <p>`, a bad search value a failed criterion naming it. Anything else the
state raises (a FHIR server that is down) propagates, and `verify_task` records it as an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from assay.checks._context import CheckContext
from assay.checks._fields import absent_entries, judge_fields, no_match_details
from assay.checks._select import Judged, choose
from assay.core.assertions import FhirField, FhirResourceState
from assay.core.results import CriterionResult
from assay.core.state import SandboxState
from assay.core.values import Reading, read_dotted
from assay.formats.fhir import FhirPathError, InvalidSearch, UnknownSearchParameter, compile_fhirpath

__all__ = ["check"]


def check(assertion: FhirResourceState, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge the assertion on the FHIR store of `state`; never raises for bad data."""
    try:
        candidates = state.fhir_search(assertion.resource_type, assertion.search)
    except UnknownSearchParameter as exc:
        return CriterionResult.unsupported(str(exc), _no_resource(assertion))
    except InvalidSearch as exc:
        return CriterionResult.failed(
            f"Invalid search for {assertion.resource_type}: {exc}.",
            _no_resource(assertion),
        )
    selection = choose(candidates, lambda resource: _judge(assertion, resource), assertion.match)
    if selection is None:
        return CriterionResult.failed(
            no_match_details(assertion.resource_type, _selector(assertion)),
            _no_resource(assertion),
        )
    return selection.result(candidates=selection.candidates)


def _judge(assertion: FhirResourceState, resource: dict[str, Any]) -> Judged:
    judgment = judge_fields(assertion.fields, lambda field: _read(field, resource))
    target = f"{resource.get('resourceType', assertion.resource_type)}/{resource.get('id', '?')}"
    return Judged(
        target=target,
        score=judgment.score,
        passed=judgment.passed,
        total=judgment.total,
        evidence=_evidence(judgment.entries, target),
        errors=judgment.errors,
    )


def _read(field: FhirField, resource: dict[str, Any]) -> Reading | str:
    """The field's value: a dotted path, or a FHIRPath expression (a string is the failure)."""
    if field.path is not None:
        return read_dotted(resource, field.path)
    try:
        values = compile_fhirpath(field.fhirpath or "")(resource)
    except FhirPathError as exc:
        return str(exc)
    return Reading.of([_plain(value) for value in values])


def _plain(value: Any) -> Any:
    """fhirpathpy returns its own date/time and quantity types; evidence needs JSON values."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return str(value)


def _no_resource(assertion: FhirResourceState) -> dict[str, Any]:
    """Evidence when no resource was judged: every field listed as absent."""
    return _evidence(absent_entries(assertion.fields), None)


def _evidence(entries: Sequence[dict[str, Any]], resource: str | None) -> dict[str, Any]:
    """`candidates` is 0 until `check` sets the pool's size on the picked candidate's evidence."""
    return {"fieldResults": list(entries), "resource": resource, "candidates": 0}


def _selector(assertion: FhirResourceState) -> str:
    """`patient=Patient/x&status=booked`; a repeated parameter once per value."""
    pairs = [
        f"{key}={value}"
        for key, given in assertion.search.items()
        for value in ([given] if isinstance(given, str) else given)
    ]
    return "&".join(pairs) if pairs else "(no search parameters)"
