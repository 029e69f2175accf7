"""Judging a list of field assertions against one target, and the details sentences (docs/assertions.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from assay.core.assertions import FieldAssertion
from assay.core.operators import evaluate
from assay.core.values import Reading

__all__ = [
    "FieldsJudgment",
    "absent_entries",
    "candidates_listed",
    "judge_fields",
    "matched_details",
    "no_match_details",
    "unparsed_listed",
]

FieldReader = Callable[[Any], "Reading | str"]
"""Reads one field's value from the target; a string is a reason the field cannot be read."""


@dataclass(frozen=True, slots=True)
class FieldsJudgment:
    entries: list[dict[str, Any]]
    passed: int
    total: int
    errors: tuple[str, ...]

    @property
    def score(self) -> Fraction:
        return Fraction(self.passed, self.total) if self.total else Fraction(1)


def judge_fields(fields: Sequence[FieldAssertion], read: FieldReader) -> FieldsJudgment:
    entries: list[dict[str, Any]] = []
    errors: list[str] = []
    passed = 0
    for field in fields:
        reading = read(field)
        if isinstance(reading, str):
            entries.append(field.evidence(None, False, reading))
            errors.append(f"{field.locator[1]}: {reading}")
            continue
        outcome = evaluate(field.operator, field.expected, reading)
        entries.append(field.evidence(reading.actual, outcome.passed, outcome.error))
        if outcome.error:
            errors.append(f"{field.locator[1]}: {outcome.error}")
        passed += outcome.passed
    return FieldsJudgment(entries, passed, len(fields), tuple(errors))


def absent_entries(fields: Sequence[FieldAssertion]) -> list[dict[str, Any]]:
    """Evidence when no target was found: every field listed, `actual: null, passed: false`."""
    return [field.evidence(None, False) for field in fields]


def matched_details(
    target: str, passed: int, total: int, noun: str = "field", errors: Sequence[str] = ()
) -> str:
    sentence = f"{target} matched; {passed} of {total} {noun} assertions passed."
    if errors:
        sentence += " " + "; ".join(errors)
    return sentence


def no_match_details(kind: str, selector: str) -> str:
    return f"No {kind} matched {selector}."


LISTED = 10
"""How many candidates or parse errors a no-match sentence names."""


def candidates_listed(label: str, targets: Sequence[str]) -> str:
    """The sentence after a no-match naming what was there: `Label: a; b and 3 more.`"""
    more = f" and {len(targets) - LISTED} more" if len(targets) > LISTED else ""
    return f"{label}: " + "; ".join(targets[:LISTED]) + more + "."


def unparsed_listed(head: str, errors: Sequence[str]) -> str:
    """The sentence after a no-match naming stored records that do not parse: `Head: e1; e2; and 3 more.`"""
    more = f"; and {len(errors) - LISTED} more" if len(errors) > LISTED else ""
    return f"{head}: " + "; ".join(errors[:LISTED]) + more + "."
