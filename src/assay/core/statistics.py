"""How much a benchmark run's score means: repeated trials, intervals and paired comparisons.

A single run says little: identical runs flip verdicts, so a mean needs an interval and a gap
between two runs needs a paired test before anyone reads it as a difference. The
interval is a percentile bootstrap over *tasks* (each task's trials averaged first, since trials of
one task are not independent of each other), with a fixed seed so the same runs always give the same
interval. pass@k and pass^k are the unbiased estimators of Chen et al. (2021) and tau-bench (2024)
for n trials with c passes: the chance that at least one / all of k trials drawn pass.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "Interval",
    "PairedComparison",
    "RunStatistics",
    "TaskTrials",
    "bootstrap_interval",
    "compare_paired",
    "pass_at_k",
    "pass_hat_k",
    "run_statistics",
]

BOOTSTRAP_RESAMPLES = 2000
_SEED = 20261126


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high

    def as_json(self) -> list[float]:
        return [round(self.low, 6), round(self.high, 6)]


@dataclass(frozen=True, slots=True)
class TaskTrials:
    """One task's trials in a run: each trial's score, and whether its verdict was `pass`."""

    scores: tuple[float, ...]
    passed: tuple[bool, ...]

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else 0.0

    @property
    def consistency(self) -> float:
        """Share of trials that agree with the task's most common outcome (1.0 = never flips)."""
        if not self.passed:
            return 1.0
        passes = sum(self.passed)
        return max(passes, len(self.passed) - passes) / len(self.passed)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def bootstrap_interval(values: Sequence[float], *, level: float = 0.95) -> Interval:
    """Percentile bootstrap interval of the mean of `values` (seeded: reproducible)."""
    if not values:
        return Interval(0.0, 0.0)
    if min(values) == max(values):
        return Interval(values[0], values[0])
    rng = random.Random(_SEED)
    n = len(values)
    means = sorted(_mean([values[rng.randrange(n)] for _ in range(n)]) for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1 - level) / 2
    low = means[int(tail * (BOOTSTRAP_RESAMPLES - 1))]
    high = means[int((1 - tail) * (BOOTSTRAP_RESAMPLES - 1))]
    return Interval(low, high)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k trials (drawn from n with c passes) passes."""
    if n == 0 or k > n:
        return 0.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Chance that all k trials (drawn from n with c passes) pass: reliability, not luck."""
    if n == 0 or k > n:
        return 0.0
    return comb(c, k) / comb(n, k)


@dataclass(frozen=True, slots=True)
class RunStatistics:
    trials: int
    mean: float
    interval: Interval
    pass_at_k: float
    pass_hat_k: float
    consistency: dict[str, float]

    def as_json(self) -> dict[str, object]:
        return {
            "trials": self.trials,
            "mean": round(self.mean, 6),
            "ci95": self.interval.as_json(),
            "pass_at_k": round(self.pass_at_k, 6),
            "pass_hat_k": round(self.pass_hat_k, 6),
            "consistency": {task: round(value, 6) for task, value in self.consistency.items()},
        }


def run_statistics(tasks: Mapping[str, TaskTrials], trials: int) -> RunStatistics:
    """Mean over tasks with its interval, pass@k and pass^k at k = `trials`, per-task consistency."""
    means = [task.mean for task in tasks.values()]
    at_k = [pass_at_k(len(t.passed), sum(t.passed), trials) for t in tasks.values()]
    hat_k = [pass_hat_k(len(t.passed), sum(t.passed), trials) for t in tasks.values()]
    return RunStatistics(
        trials=trials,
        mean=_mean(means),
        interval=bootstrap_interval(means),
        pass_at_k=_mean(at_k),
        pass_hat_k=_mean(hat_k),
        consistency={name: task.consistency for name, task in tasks.items()},
    )


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Run A minus run B over the tasks both ran."""

    differences: dict[str, float]
    mean_difference: float
    interval: Interval
    unmatched: tuple[str, ...]

    @property
    def exceeds_noise(self) -> bool:
        """The 95% interval of the paired difference leaves out 0."""
        return bool(self.differences) and self.interval.excludes(0.0)

    def as_json(self) -> dict[str, object]:
        return {
            "mean_difference": round(self.mean_difference, 6),
            "ci95": self.interval.as_json(),
            "exceeds_noise": self.exceeds_noise,
            "tasks": {task: round(value, 6) for task, value in self.differences.items()},
            "unmatched_tasks": list(self.unmatched),
        }


def compare_paired(a: Mapping[str, TaskTrials], b: Mapping[str, TaskTrials]) -> PairedComparison:
    """Per-task differences of mean scores and the bootstrap interval of their mean."""
    shared = [task for task in a if task in b]
    differences = {task: a[task].mean - b[task].mean for task in shared}
    values = list(differences.values())
    unmatched = tuple(sorted(set(a).symmetric_difference(b)))
    return PairedComparison(differences, _mean(values), bootstrap_interval(values), unmatched)
