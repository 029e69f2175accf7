"""Task, axis and benchmark-run scores (SPEC §4), exact to the last digit."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.scoring import (
    DEFAULT_AXIS,
    ScoredCriterion,
    as_fraction,
    score_benchmark_run,
    score_task,
    verdict_for,
)


def crit(
    score: str | int, weight: str | float = 1, axis: str | None = None, errored: bool = False
) -> ScoredCriterion:
    return ScoredCriterion(Fraction(score), as_fraction(weight), axis, errored)


def test_seed_example_axes() -> None:
    result = score_task([crit(1, 2, "correctness"), crit(0, 1, "safety")])
    assert result.score == Fraction(2, 3)
    assert result.verdict == "partial"
    assert result.axes_json() == {
        "correctness": {"score": 1.0, "weight": 2},
        "safety": {"score": 0.0, "weight": 1},
    }


def test_nine_of_ten_decimal_weights_is_exactly_a_pass() -> None:
    criteria = [crit(1, 0.1) for _ in range(9)] + [crit(0, 0.1)]
    result = score_task(criteria)
    assert result.score == Fraction(9, 10)
    assert result.verdict == "pass"
    assert score_task([crit(1, 0.7), crit(1, 0.2), crit(0, 0.1)]).score == Fraction(9, 10)


@pytest.mark.parametrize(
    ("score", "verdict"),
    [
        (Fraction(1), "pass"),
        (Fraction(9, 10), "pass"),
        (Fraction(899, 1000), "partial"),
        (Fraction(1, 10**9), "partial"),
        (Fraction(0), "fail"),
    ],
)
def test_verdict_thresholds(score: Fraction, verdict: str) -> None:
    assert verdict_for(score) == verdict


def test_no_criteria_fails_with_zero_and_no_axes() -> None:
    result = score_task([])
    assert (result.score, result.verdict, result.axes) == (Fraction(0), "fail", {})
    assert verdict_for(Fraction(1), has_items=False) == "fail"


def test_criteria_without_axis_go_to_default() -> None:
    result = score_task([crit(1, 1), crit("1/2", 3, "efficiency"), crit(0, 1)])
    assert set(result.axes) == {DEFAULT_AXIS, "efficiency"}
    assert result.axes[DEFAULT_AXIS].score == Fraction(1, 2)
    assert result.axes[DEFAULT_AXIS].weight == 2
    assert result.axes_json()["efficiency"] == {"score": 0.5, "weight": 3}


def test_errored_criteria_count_as_zero() -> None:
    result = score_task([crit(1, 1), crit(1, 1, errored=True)])
    assert result.score == Fraction(1, 2)


def test_weights_must_be_positive() -> None:
    with pytest.raises(ValueError, match="weight must be > 0"):
        score_task([crit(1, 0)])


def test_decimal_weights_are_exact() -> None:
    assert as_fraction(0.1) == Fraction(1, 10)
    assert as_fraction("0.30") == Fraction(3, 10)
    assert as_fraction(Decimal("2.5")) == Fraction(5, 2)
    assert as_fraction(3) == 3
    assert score_task([crit(1, 0.5)]).axes_json()[DEFAULT_AXIS]["weight"] == 0.5


def test_benchmark_run_is_the_mean_of_task_scores() -> None:
    assert score_benchmark_run([Fraction(1), Fraction(4, 5), Fraction(9, 10)]) == (Fraction(9, 10), "pass")
    assert score_benchmark_run([Fraction(1), Fraction(0)]) == (Fraction(1, 2), "partial")
    assert score_benchmark_run([Fraction(0), Fraction(0)]) == (Fraction(0), "fail")
    assert score_benchmark_run([]) == (Fraction(0), "fail")


# -- properties -----------------------------------------------------------------------------------

_SCORES = st.fractions(min_value=0, max_value=1, max_denominator=12)
_WEIGHTS = st.decimals(min_value=Decimal("0.01"), max_value=Decimal(100), places=2)
_AXES = st.sampled_from([None, "correctness", "safety"])
_CRITERIA = st.lists(st.tuples(_SCORES, _WEIGHTS, _AXES, st.booleans()), min_size=1, max_size=12)


def _build(items: list[tuple[Fraction, Decimal, str | None, bool]]) -> list[ScoredCriterion]:
    return [
        ScoredCriterion(score, as_fraction(weight), axis, errored) for score, weight, axis, errored in items
    ]


def _mean(items: list[tuple[Fraction, Decimal, str | None, bool]]) -> Fraction:
    total = sum((Fraction(w) for _, w, _, _ in items), Fraction(0))
    return sum((Fraction(0) if e else s) * Fraction(w) for s, w, _, e in items) / total


@given(_CRITERIA)
def test_task_score_is_the_exact_weighted_mean(
    items: list[tuple[Fraction, Decimal, str | None, bool]],
) -> None:
    result = score_task(_build(items))
    assert result.score == _mean(items)
    assert 0 <= result.score <= 1
    expected_verdict = (
        "fail" if result.score == 0 else "pass" if result.score >= Fraction(9, 10) else "partial"
    )
    assert result.verdict == expected_verdict


@given(_CRITERIA)
def test_each_axis_is_the_weighted_mean_of_its_criteria(
    items: list[tuple[Fraction, Decimal, str | None, bool]],
) -> None:
    result = score_task(_build(items))
    groups: dict[str, list[tuple[Fraction, Decimal, str | None, bool]]] = {}
    for item in items:
        groups.setdefault(item[2] or DEFAULT_AXIS, []).append(item)
    assert set(result.axes) == set(groups)
    for name, group in groups.items():
        assert result.axes[name].score == _mean(group)
        assert result.axes[name].weight == sum(Fraction(w) for _, w, _, _ in group)


@given(_CRITERIA, st.randoms(use_true_random=False))
def test_order_does_not_change_the_score(
    items: list[tuple[Fraction, Decimal, str | None, bool]], rnd: object
) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert score_task(_build(shuffled)).score == score_task(_build(items)).score


@given(st.lists(_SCORES, min_size=1, max_size=20))
def test_benchmark_run_mean_property(scores: list[Fraction]) -> None:
    mean, verdict = score_benchmark_run(scores)
    assert mean == sum(scores, Fraction(0)) / len(scores)
    assert verdict == verdict_for(mean)
