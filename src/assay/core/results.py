"""The outcome of one check on one criterion.

A check never raises for bad data: it returns a `CriterionResult`. The named constructors cover the
outcomes that are not an honest score (docs/assertions.md): an assertion that does not parse is
`unsupported`, an infrastructure failure (time limit, store down) is `error`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

__all__ = ["UNSUPPORTED_PREFIX", "CriterionResult", "Status"]

Status = Literal["ok", "error"]
UNSUPPORTED_PREFIX = "unsupported assertion: "


@dataclass(frozen=True, slots=True)
class CriterionResult:
    """What a check found for one criterion."""

    score: Fraction
    """Fraction of the criterion's field or phrase assertions that hold, in [0, 1]."""
    details: str
    """One human sentence that explains the score (docs/assertions.md)."""
    evidence: dict[str, Any] = field(default_factory=dict)
    """Structured payload that justifies the score; its keys depend on the check."""
    status: Status = "ok"
    """`ok` for an honest judgment (pass or fail), `error` when the check could not judge."""

    @property
    def passed(self) -> bool:
        return self.status == "ok" and self.score == 1

    @classmethod
    def unsupported(cls, reason: str, evidence: dict[str, Any] | None = None) -> CriterionResult:
        return cls(Fraction(0), UNSUPPORTED_PREFIX + reason, evidence or {})

    @classmethod
    def error(cls, reason: str) -> CriterionResult:
        return cls(Fraction(0), reason, {}, status="error")

    @classmethod
    def failed(cls, details: str, evidence: dict[str, Any] | None = None) -> CriterionResult:
        return cls(Fraction(0), details, evidence or {})
