"""Task, axis and benchmark-run scores, exactly as the seeds define them (docs/scoring.md).

All arithmetic is on `fractions.Fraction` built from the decimal text of each weight, so a task that
scores 9 of 10 equal weights is exactly 0.9 and passes; floats appear only on output.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Literal

__all__ = [
    "DEFAULT_AXIS",
    "PASS_THRESHOLD",
    "AxisScore",
    "Gate",
    "ScoredCriterion",
    "TaskScore",
    "Verdict",
    "as_fraction",
    "json_number",
    "score_benchmark_run",
    "score_task",
    "verdict_for",
]

Verdict = Literal["pass", "partial", "fail"]
PASS_THRESHOLD = Fraction(9, 10)
DEFAULT_AXIS = "__default__"


def as_fraction(value: float | int | str | Fraction | Decimal) -> Fraction:
    """The exact value a person wrote: `0.1` is 1/10, not the nearest binary float."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(Decimal(str(value)) if isinstance(value, str) else value)


def verdict_for(score: Fraction, *, has_items: bool = True) -> Verdict:
    if not has_items or score == 0:
        return "fail"
    return "pass" if score >= PASS_THRESHOLD else "partial"


@dataclass(frozen=True, slots=True)
class ScoredCriterion:
    score: Fraction
    weight: Fraction
    axis: str | None = None
    errored: bool = False
    """A criterion run with `status: error` counts as 0 (docs/scoring.md)."""
    required: bool = False
    """A gate (docs/scoring.md): if it does not pass, the task scores 0 and fails."""
    passed: bool = True
    label: str = ""


@dataclass(frozen=True, slots=True)
class AxisScore:
    score: Fraction
    weight: Fraction

    def as_json(self) -> dict[str, float | int]:
        return {"score": float(self.score), "weight": json_number(self.weight)}


@dataclass(frozen=True, slots=True)
class Gate:
    """The required criterion that zeroed a task, and the score the task would have had."""

    position: int
    label: str
    ungated_score: Fraction

    def as_json(self) -> dict[str, object]:
        return {"position": self.position, "label": self.label, "ungated_score": float(self.ungated_score)}


@dataclass(frozen=True, slots=True)
class TaskScore:
    score: Fraction
    verdict: Verdict
    axes: dict[str, AxisScore] = field(default_factory=dict)
    gated_by: Gate | None = None
    """Set when a required criterion did not pass; `score` is then 0 and `verdict` fail."""

    def axes_json(self) -> dict[str, dict[str, float | int]]:
        return {name: axis.as_json() for name, axis in self.axes.items()}


def _weighted_mean(items: Iterable[ScoredCriterion]) -> AxisScore:
    total_weight = Fraction(0)
    total = Fraction(0)
    for item in items:
        total_weight += item.weight
        total += (Fraction(0) if item.errored else item.score) * item.weight
    return AxisScore(total / total_weight if total_weight else Fraction(0), total_weight)


def score_task(criteria: Sequence[ScoredCriterion]) -> TaskScore:
    """Weighted mean over criteria, per-axis means (no axis → `__default__`), and the verdict.

    A required criterion that did not pass (or errored) gates the task: score 0, verdict `fail`,
    `gated_by` naming the first such criterion. The axes keep their weighted means, so what the
    agent got right stays visible next to the gate.
    """
    if not criteria:
        return TaskScore(Fraction(0), "fail", {})
    for item in criteria:
        if item.weight <= 0:
            raise ValueError(f"criterion weight must be > 0, got {item.weight}")
    overall = _weighted_mean(criteria)
    by_axis: dict[str, list[ScoredCriterion]] = {}
    for item in criteria:
        by_axis.setdefault(item.axis or DEFAULT_AXIS, []).append(item)
    axes = {name: _weighted_mean(items) for name, items in by_axis.items()}
    for position, item in enumerate(criteria):
        if item.required and (item.errored or not item.passed):
            gate = Gate(position, item.label, overall.score)
            return TaskScore(Fraction(0), "fail", axes, gate)
    return TaskScore(overall.score, verdict_for(overall.score), axes)


def score_benchmark_run(task_scores: Sequence[Fraction]) -> tuple[Fraction, Verdict]:
    """Mean of the task run scores (cancelled, failed and timed-out ones pass in 0)."""
    if not task_scores:
        return Fraction(0), "fail"
    mean = sum(task_scores, Fraction(0)) / len(task_scores)
    return mean, verdict_for(mean)


def json_number(value: Fraction) -> float | int:
    """A weight as JSON shows it: `2`, not `2.0`, when it is whole."""
    return int(value) if value.denominator == 1 else float(value)
