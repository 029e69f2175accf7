"""`hl7-structural`: judge the HL7v2 messages the agent sent (docs/assertions.md).

Candidates are the accepted outbound messages in arrival order, each message of an FHS/BHS batch
on its own. A stored message that does not parse is not a candidate; its parse error only shows
in `details` when nothing matched. `correlate_by` narrows the candidates (every key must hold),
`match` picks one (`checks._select`), and the field assertions score it (`checks._fields`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from assay.checks._context import CheckContext
from assay.checks._fields import (
    absent_entries,
    candidates_listed,
    judge_fields,
    no_match_details,
    unparsed_listed,
)
from assay.checks._parsed import parse_once
from assay.checks._select import Judged, choose
from assay.core.assertions import Hl7Field, Hl7Structural
from assay.core.operators import values_equal
from assay.core.results import CriterionResult
from assay.core.state import Hl7Record, SandboxState
from assay.core.values import ABSENT, Reading
from assay.formats.hl7 import Hl7Message, Hl7ParseError, Hl7Path, Hl7PathError, Hl7Value, parse_messages

__all__ = ["check"]

_ALIASES: Mapping[str, Callable[[Hl7Message], Hl7Value]] = {
    "message_type": lambda message: message.message_type,
    "trigger_event": lambda message: message.trigger_event,
    "control_id": lambda message: message.control_id,
}
"""The `correlate_by` aliases of docs/assertions.md; keys equal `core.assertions.hl7.CORRELATION_ALIASES`."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    record: Hl7Record
    message: Hl7Message
    in_batch: bool

    @property
    def target(self) -> str:
        """How details name it: `ADT^A04 message 42`, `(batch item 2)` inside a batch."""
        name = f"{self.message.message_type.value or 'HL7'} message {self.record.seq}"
        return name + (f" (batch item {self.message.position})" if self.in_batch else "")


def check(assertion: Hl7Structural, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Score the best outbound message per `match`; never raises for bad messages."""
    candidates, parse_errors = _candidates(state.hl7_outbound())
    matching = [c for c in candidates if _correlates(c.message, assertion.correlate_by)]
    selection = choose(matching, partial(_judge, assertion.fields), assertion.match)
    if selection is None:
        details = _no_match(assertion.correlate_by, candidates, parse_errors)
        evidence = {"field_results": absent_entries(assertion.fields), "event_id": None, "control_id": None}
        return CriterionResult.failed(details, evidence)
    return selection.result()


def _candidates(records: Sequence[Hl7Record]) -> tuple[list[_Candidate], list[str]]:
    candidates: list[_Candidate] = []
    errors: list[str] = []
    for record in records:
        messages, error = _parsed(record.message)
        if error is not None:
            errors.append(f"message {record.seq}: {error}")
        candidates.extend(_Candidate(record, message, len(messages) > 1) for message in messages)
    return candidates, errors


def _parse(raw: str) -> tuple[tuple[Hl7Message, ...], str | None]:
    try:
        return tuple(parse_messages(raw)), None
    except Hl7ParseError as exc:
        return (), str(exc)


_parsed = parse_once(_parse, maxsize=512)
"""Parse once per stored text: several criteria of a task read the same messages."""


def _correlates(message: Hl7Message, correlate_by: Mapping[str, str]) -> bool:
    for key, expected in correlate_by.items():
        alias = _ALIASES.get(key)
        try:
            found = alias(message) if alias else message.read(Hl7Path.parse(key))
        except Hl7PathError:
            return False
        if not values_equal(found.value, expected):
            return False
    return True


def _judge(fields: Sequence[Hl7Field], candidate: _Candidate) -> Judged:
    judgment = judge_fields(fields, partial(_read, candidate.message))
    evidence = {
        "field_results": judgment.entries,
        "event_id": candidate.record.event_id,
        "control_id": candidate.message.control_id.value,
    }
    return Judged(
        candidate.target, judgment.score, judgment.passed, judgment.total, evidence, judgment.errors
    )


def _read(message: Hl7Message, field: Hl7Field) -> Reading | str:
    try:
        value = message.read(field.hl7_path)
    except Hl7PathError as exc:
        return str(exc)
    return Reading.of([value.value]) if value.found else ABSENT


def _no_match(
    correlate_by: Mapping[str, str], candidates: Sequence[_Candidate], errors: Sequence[str]
) -> str:
    selector = ", ".join(f"{key}={value}" for key, value in correlate_by.items()) or "correlate_by {}"
    details = no_match_details("HL7 message", selector)
    if candidates:
        details += " " + candidates_listed("Outbound messages", [c.target for c in candidates])
    elif not errors:
        details += " No outbound HL7 message was sent."
    if errors:
        head = "None of the stored messages parses" if not candidates else "Some stored messages do not parse"
        details += " " + unparsed_listed(head, errors)
    return details
