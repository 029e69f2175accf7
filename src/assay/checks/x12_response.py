"""`x12-response`: judge the clearinghouse responses the agent received (docs/assertions.md).

Candidates are the ST…SE transaction sets of every stored response, in arrival order (999/997
acknowledgements and TA1s are not candidates). `transaction` keeps one exchange family,
`correlate_by` narrows the candidates (every key must hold, read from the response and else from
the request), `match` picks one (`checks._select`), and the field assertions score it
(`checks._fields`). A response that does not parse is not a candidate; its parse error shows in
`details` when nothing parses. Envelope problems are warnings in the evidence, never a reason to
drop a transaction set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from assay.checks._context import CheckContext
from assay.checks._fields import (
    absent_entries,
    candidates_listed,
    judge_fields,
    no_match_details,
    unparsed_listed,
)
from assay.checks._select import Judged, choose
from assay.checks._x12 import every_value, member_ids
from assay.checks._x12 import parsed_x12 as _parsed
from assay.core.assertions import X12Field, X12Response
from assay.core.operators import values_equal
from assay.core.results import CriterionResult
from assay.core.state import SandboxState, X12Record
from assay.core.values import ABSENT, Reading
from assay.formats.x12 import (
    ACKNOWLEDGEMENTS,
    X12Document,
    X12Path,
    X12TransactionSet,
    segments_in,
)

__all__ = ["check"]

_FAMILIES: Mapping[str, frozenset[str]] = {
    "270": frozenset({"270", "271"}),
    "271": frozenset({"270", "271"}),
    "276": frozenset({"276", "277"}),
    "277": frozenset({"276", "277"}),
    "278": frozenset({"278"}),
}
"""`transaction` filter → the ST01 values of that exchange (eligibility, claim status, review)."""

_TRACE_LOOPS = {
    "270": ("2000C",),
    "271": ("2000C",),
    "276": ("2000D",),
    "277": ("2000D",),
    "278": ("2000C",),
}
"""The subscriber HL loop; its descendants hold the dependent (and, in a 278, patient event) loops."""
_PATIENT_CONTROL_NUMBER = {"276": "2200D/TRN02", "277": "2200D/TRN02"}


@dataclass(frozen=True, slots=True)
class _Candidate:
    record: X12Record
    transaction: X12TransactionSet
    request: X12Document | None

    @property
    def target(self) -> str:
        """How details name it: `271 4321 in X12 response 3`."""
        return f"{self.transaction.code} {self.transaction.control_number} in X12 response {self.record.seq}"


def check(assertion: X12Response, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Score the best transaction set per `match`; never raises for bad records."""
    pool = _candidates(state.x12_records(), assertion.transaction)
    matching = [c for c in pool.candidates if _correlates(c, assertion.correlate_by)]
    selection = choose(matching, partial(_judge, assertion.fields), assertion.match)
    if selection is None:
        evidence = {"fieldResults": absent_entries(assertion.fields), "record_id": None, "transaction": None}
        details = _no_match(assertion, pool)
        return CriterionResult.failed(details, evidence)
    return selection.result()


class _Pool(NamedTuple):
    candidates: list[_Candidate]
    parse_errors: list[str]
    records: int


def _candidates(records: Sequence[X12Record], transaction: str | None) -> _Pool:
    family = _FAMILIES.get(transaction) if transaction else None
    candidates: list[_Candidate] = []
    errors: list[str] = []
    for record in records:
        response, error = _parsed(record.response)
        if response is None:
            errors.append(f"response {record.seq}: {error}")
            continue
        request = _parsed(record.request).document if record.request else None
        for one in response.transactions():
            if one.code in ACKNOWLEDGEMENTS or (family is not None and one.code not in family):
                continue
            candidates.append(_Candidate(record, one, request))
    return _Pool(candidates, errors, len(records))


def _correlates(candidate: _Candidate, correlate_by: Mapping[str, str]) -> bool:
    for key, expected in correlate_by.items():
        found = _correlation_values(key, candidate.transaction)
        if not found and candidate.request is not None:
            for request in candidate.request.transactions():
                found = _correlation_values(key, request)
                if found:
                    break
        if not any(values_equal(value, expected) for value in found):
            return False
    return True


def _correlation_values(key: str, transaction: X12TransactionSet) -> list[str]:
    """What a `correlate_by` key reads: every instance for an alias, the path's value otherwise."""
    code = transaction.code
    if key == "member_id":
        return member_ids(transaction)
    if key == "patient_control_number":
        return every_value(_PATIENT_CONTROL_NUMBER.get(code), transaction)
    if key == "trace_number":
        loops = _TRACE_LOOPS.get(code)
        if loops is None:
            return []
        segments = segments_in(transaction, loops)
        return [value for s in segments if s.id == "TRN" and (value := s.value(2))]
    value = X12Path.parse(key).read(transaction)
    return [value] if value is not None else []


def _judge(fields: Sequence[X12Field], candidate: _Candidate) -> Judged:
    judgment = judge_fields(fields, partial(_read, candidate.transaction))
    evidence: dict[str, object] = {
        "fieldResults": judgment.entries,
        "record_id": candidate.record.record_id,
        "transaction": candidate.transaction.code,
    }
    warnings = candidate.transaction.envelope_warnings()
    if warnings:
        evidence["warnings"] = warnings
    return Judged(
        candidate.target, judgment.score, judgment.passed, judgment.total, evidence, judgment.errors
    )


def _read(transaction: X12TransactionSet, field: X12Field) -> Reading:
    value = field.x12_path.read(transaction)
    return ABSENT if value is None else Reading.of([value])


def _no_match(assertion: X12Response, pool: _Pool) -> str:
    candidates, errors, records = pool
    parts = [f"transaction={assertion.transaction}"] if assertion.transaction else []
    parts.extend(f"{key}={value}" for key, value in assertion.correlate_by.items())
    details = no_match_details("X12 response", ", ".join(parts) or "any transaction set")
    if candidates:
        details += " " + candidates_listed("Transaction sets", [c.target for c in candidates])
    elif not records:
        details += " No X12 exchange was recorded."
    elif not errors or len(errors) < records:
        family = _FAMILIES.get(assertion.transaction or "")
        if family:
            details += f" No recorded response holds a {'/'.join(sorted(family))} transaction set."
        else:
            details += " No recorded response holds a transaction set other than 999/997 acknowledgements."
    if errors:
        head = (
            "None of the stored responses parses"
            if len(errors) == records
            else "Some stored responses do not parse"
        )
        details += " " + unparsed_listed(head, errors)
    return details
