"""`match` modes over candidates in recency order, oldest first (SPEC §3.1, checks/_select.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.checks._select import Judged, choose


def judge(item: tuple[str, Fraction]) -> Judged:
    name, score = item
    return Judged(target=name, score=score, passed=0, total=0, evidence={"name": name})


CANDIDATES = [
    ("oldest", Fraction(1, 2)),
    ("middle", Fraction(1)),
    ("newer", Fraction(0)),
    ("latest", Fraction(1, 2)),
]


@pytest.mark.parametrize(
    ("match", "target", "score"),
    [
        ("any", "middle", Fraction(1)),
        ("first", "oldest", Fraction(1, 2)),
        ("latest", "latest", Fraction(1, 2)),
        ("all", "newer", Fraction(0)),
    ],
)
def test_modes(match: str, target: str, score: Fraction) -> None:
    selection = choose(CANDIDATES, judge, match)
    assert selection is not None
    assert (selection.judged.target, selection.score, selection.candidates) == (target, score, 4)


def test_no_candidates_is_no_selection() -> None:
    for match in ("any", "first", "latest", "all"):
        assert choose([], judge, match) is None


def test_any_ties_go_to_the_latest() -> None:
    selection = choose([("a", Fraction(1)), ("b", Fraction(1)), ("c", Fraction(0))], judge, "any")
    assert selection is not None and selection.judged.target == "b"


def test_all_shows_the_latest_of_the_lowest() -> None:
    selection = choose([("a", Fraction(0)), ("b", Fraction(1)), ("c", Fraction(0))], judge, "all")
    assert selection is not None and selection.judged.target == "c"
    assert selection.judged.evidence == {"name": "c"}


def test_first_and_latest_judge_only_one_candidate() -> None:
    seen: list[str] = []

    def counting(item: tuple[str, Fraction]) -> Judged:
        seen.append(item[0])
        return judge(item)

    choose(CANDIDATES, counting, "first")
    choose(CANDIDATES, counting, "latest")
    assert seen == ["oldest", "latest"]


_SCORED = st.lists(st.fractions(min_value=0, max_value=1, max_denominator=4), min_size=1, max_size=8)


@given(_SCORED)
def test_any_is_the_maximum_and_all_the_minimum(scores: list[Fraction]) -> None:
    items = [(str(i), s) for i, s in enumerate(scores)]
    best, worst = choose(items, judge, "any"), choose(items, judge, "all")
    assert best is not None and worst is not None
    assert best.score == max(scores) and worst.score == min(scores)
    assert int(best.judged.target) == max(i for i, s in enumerate(scores) if s == max(scores))
    assert int(worst.judged.target) == max(i for i, s in enumerate(scores) if s == min(scores))
