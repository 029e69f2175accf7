"""Trial statistics against known answers (issue 14): pass@k and pass^k by hand, seeded
intervals, and paired comparisons."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.core.scoring import ScoredCriterion, score_task
from assay.core.statistics import (
    TaskTrials,
    bootstrap_interval,
    compare_paired,
    pass_at_k,
    pass_hat_k,
    run_statistics,
)


def trials(*outcomes: bool) -> TaskTrials:
    return TaskTrials(tuple(1.0 if o else 0.0 for o in outcomes), outcomes)


def test_pass_at_k_and_pass_hat_k_by_hand() -> None:
    # 5 trials, 2 passes: P(at least one of 2 passes) = 1 - C(3,2)/C(5,2) = 1 - 3/10.
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # P(both of 2 pass) = C(2,2)/C(5,2) = 1/10.
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert pass_at_k(3, 0, 3) == 0 and pass_hat_k(3, 3, 3) == 1 and pass_hat_k(3, 2, 3) == 0


def test_all_passing_run_has_pass_hat_k_one_and_zero_width_interval() -> None:
    stats = run_statistics({"a": trials(True, True, True), "b": trials(True, True, True)}, 3)
    assert stats.pass_hat_k == 1 and stats.pass_at_k == 1
    assert (stats.interval.low, stats.interval.high) == (1.0, 1.0)
    assert stats.consistency == {"a": 1.0, "b": 1.0}


def test_flaky_task_lowers_pass_hat_k_not_pass_at_k() -> None:
    stats = run_statistics({"steady": trials(True, True), "flaky": trials(True, False)}, 2)
    assert stats.pass_at_k == 1 and stats.pass_hat_k == 0.5 and stats.consistency["flaky"] == 0.5
    assert stats.mean == 0.75


def test_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    first, second = bootstrap_interval(values), bootstrap_interval(values)
    assert first == second
    mean = sum(values) / len(values)
    assert first.low < mean < first.high and first.low >= 0 and first.high <= 1


@settings(deadline=None, max_examples=40)  # 2,000 resamples each: no per-example deadline on a busy CI
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=30))
def test_interval_stays_within_the_values(values: list[float]) -> None:
    interval = bootstrap_interval(values)
    assert min(values) - 1e-9 <= interval.low <= interval.high <= max(values) + 1e-9


def test_identical_runs_compare_as_no_difference() -> None:
    run = {"a": trials(True, False), "b": trials(False, False), "c": trials(True, True)}
    comparison = compare_paired(run, run)
    assert comparison.mean_difference == 0 and comparison.exceeds_noise is False
    assert comparison.differences == {"a": 0.0, "b": 0.0, "c": 0.0}


def test_compare_reports_unmatched_tasks() -> None:
    comparison = compare_paired(
        {"a": trials(True), "x": trials(True)}, {"a": trials(False), "y": trials(True)}
    )
    assert comparison.differences == {"a": 1.0} and comparison.unmatched == ("x", "y")


def test_required_criterion_gates_the_task() -> None:
    criteria = [
        ScoredCriterion(Fraction(1), Fraction(3), label="booked"),
        ScoredCriterion(Fraction(0), Fraction(1), required=True, passed=False, label="identity"),
    ]
    result = score_task(criteria)
    assert result.score == 0 and result.verdict == "fail"
    assert result.gated_by is not None and result.gated_by.label == "identity"
    assert result.gated_by.ungated_score == Fraction(3, 4)
    errored = [ScoredCriterion(Fraction(1), Fraction(1), errored=True, required=True, label="e")]
    assert score_task(errored).gated_by is not None


def test_interval_matches_the_normal_approximation_on_a_large_sample() -> None:
    # Known answer: 100 values, half 0 and half 1 — mean 0.5, standard error sqrt(0.25 / 100) = 0.05,
    # so the 95% interval is about 0.5 ± 1.96 * 0.05 = [0.402, 0.598]; the bootstrap (seeded, 2,000
    # resamples, steps of 0.01) lands within a step or two of it.
    interval = bootstrap_interval([0.0] * 50 + [1.0] * 50)
    assert interval.low == pytest.approx(0.402, abs=0.02) and interval.high == pytest.approx(0.598, abs=0.02)


def test_a_gap_beyond_the_noise_by_hand() -> None:
    # Every task one point better in `a`: the paired differences are all 1, a zero-width interval.
    better = {"a": trials(True), "b": trials(True), "c": trials(True)}
    worse = {"a": trials(False), "b": trials(False), "c": trials(False)}
    comparison = compare_paired(better, worse)
    assert comparison.mean_difference == 1 and comparison.exceeds_noise is True
    assert (comparison.interval.low, comparison.interval.high) == (1.0, 1.0)
