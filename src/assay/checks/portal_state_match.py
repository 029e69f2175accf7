"""`portal-state-match`: a portal resource row holds the expected values (docs/assertions.md).

Candidates are the rows of `correlate_by.resource` (of one portal when `portal` is set) whose
`correlate_by.key` equals the wanted value by the rules of docs/assertions.md. The wanted value is
`correlate_by.value` when the assertion gives one — an explicit `null` included, which selects rows
whose key is empty — else the input entity's value of `key`. With neither, every row of the
resource is a candidate. `match` then picks one (checks/_select.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from assay.checks._context import CheckContext
from assay.checks._fields import absent_entries, judge_fields, no_match_details
from assay.checks._select import Judged, choose
from assay.core.assertions import PortalStateMatch
from assay.core.operators import evaluate
from assay.core.results import CriterionResult
from assay.core.state import PortalRow, SandboxState
from assay.core.values import read_dotted, read_key

__all__ = ["check"]

_NOT_GIVEN = object()


def check(assertion: PortalStateMatch, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge the assertion on the portal rows of `state`; never raises for bad data."""
    correlation = assertion.correlate_by
    wanted = _wanted_value(assertion, context)
    if isinstance(wanted, _MissingKey):
        return CriterionResult.failed(
            f"input entity has no {correlation.key}", _evidence(absent_entries(assertion.assertions), None)
        )
    rows = state.portal_rows(correlation.resource, assertion.portal)
    if wanted is not _NOT_GIVEN:
        rows = [row for row in rows if _key_equals(row, correlation.key, wanted)]
    selection = choose(rows, lambda row: _judge(assertion, row), assertion.match)
    if selection is None:
        return CriterionResult.failed(
            no_match_details(_kind(assertion), _selector(assertion, wanted)),
            _evidence(absent_entries(assertion.assertions), None),
        )
    return selection.result()


class _MissingKey:
    """The input entity exists but has no value for the correlation key."""


def _wanted_value(assertion: PortalStateMatch, context: CheckContext) -> Any:
    """`value` when given (null too), else the input entity's, else `_NOT_GIVEN` (every row)."""
    correlation = assertion.correlate_by
    if "value" in correlation.model_fields_set:
        return correlation.value
    entity = context.input_entity
    if entity is None:
        return _NOT_GIVEN
    reading = read_key(dict(entity), correlation.key)
    if not reading.found:
        return _MissingKey()
    return reading.actual


def _key_equals(row: PortalRow, key: str, wanted: Any) -> bool:
    return evaluate("equals", wanted, read_key(row.row, key)).passed


def _judge(assertion: PortalStateMatch, row: PortalRow) -> Judged:
    judgment = judge_fields(assertion.assertions, lambda field: read_dotted(row.row, field.path))
    row_key = read_key(row.row, assertion.correlate_by.key)
    return Judged(
        target=_target(row, assertion.correlate_by.key, row_key.actual if row_key.found else None),
        score=judgment.score,
        passed=judgment.passed,
        total=judgment.total,
        evidence=_evidence(judgment.entries, row_key.actual),
        errors=judgment.errors,
    )


def _evidence(entries: Sequence[dict[str, Any]], row_key: Any) -> dict[str, Any]:
    return {"assertionResults": list(entries), "row_key": row_key}


def _target(row: PortalRow, key: str, key_value: Any) -> str:
    """How details name a row: `payer-a/prior_auth_requests[member_id="M1"]`, else by position."""
    prefix = f"{row.portal}/" if row.portal else ""
    where = f"{key}={_show(key_value)}" if key_value is not None else f"#{row.seq + 1}"
    return f"{prefix}{row.resource}[{where}]"


def _kind(assertion: PortalStateMatch) -> str:
    portal = f" in portal {assertion.portal}" if assertion.portal else ""
    return f"{assertion.correlate_by.resource} row{portal}"


def _selector(assertion: PortalStateMatch, wanted: Any) -> str:
    if wanted is _NOT_GIVEN:
        return "(the resource has no rows)"
    return f"{assertion.correlate_by.key} = {_show(wanted)}"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
