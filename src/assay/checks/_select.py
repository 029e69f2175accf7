"""Choosing among candidates by `match` (docs/assertions.md), shared by every check that selects.

Candidates arrive in recency order, oldest first. `any` keeps the best score, ties to the latest;
`first`/`latest` judge one end only; `all` scores the minimum and shows the lowest-scoring one
(ties to the latest, like `any`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from assay.checks._fields import matched_details
from assay.core.results import CriterionResult

__all__ = ["Judged", "Selection", "choose"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Judged:
    """One candidate, judged."""

    target: str
    """How details name it: `Appointment/123`, `message 3 (ADT^A04)`, `reports/a.json`."""
    score: Fraction
    passed: int
    total: int
    evidence: dict[str, Any]
    errors: tuple[str, ...] = ()

    @property
    def details(self) -> str:
        """The matched sentence (docs/assertions.md) for this candidate."""
        return matched_details(self.target, self.passed, self.total, errors=self.errors)


@dataclass(frozen=True, slots=True)
class Selection:
    judged: Judged
    """The candidate `match` picked; its score is the criterion's."""
    candidates: int

    @property
    def score(self) -> Fraction:
        return self.judged.score

    def result(self, **evidence: Any) -> CriterionResult:
        """The criterion's result: the picked candidate's score, sentence and evidence, plus
        `evidence` (what the check adds about the whole pool, e.g. `matchedPaths`)."""
        return CriterionResult(self.judged.score, self.judged.details, {**self.judged.evidence, **evidence})


def choose(candidates: Sequence[T], judge: Callable[[T], Judged], match: str) -> Selection | None:
    if not candidates:
        return None
    if match == "first":
        one = judge(candidates[0])
        return Selection(one, len(candidates))
    if match == "latest":
        one = judge(candidates[-1])
        return Selection(one, len(candidates))
    pick: Judged | None = None
    for candidate in candidates:
        judged = judge(candidate)
        if pick is None:
            pick = judged
        elif match == "all":
            if judged.score <= pick.score:
                pick = judged
        elif judged.score >= pick.score:
            pick = judged
    assert pick is not None
    return Selection(pick, len(candidates))
