"""The labelled phrase set (tests/fixtures/voice/labelled/phrases.yaml) and its scores.

Shared by tests/checks/test_voice_labelled_set.py (thresholds asserted in CI) and
bench/bench_voice_matcher.py (the full table). Each item is one agent turn and one phrase,
judged as a `contains` phrase on a one-turn transcript with the given tiers.

The set is cut in two by phrase so that tier 3's thresholds are chosen on items they are not
reported on: the 1st, 3rd, 5th… phrase entries of the file (all their turns) are the
`calibration` split, the 2nd, 4th, 6th… the `held-out` split. Cutting by phrase, not by item,
keeps one phrase's wording out of the split that judges it. `calibrate` is the procedure that
chose `_semantic.THRESHOLD` and `_semantic.ALIGNMENT` (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.checks._speech import normalise
from assay.checks.vocabulary import Lexicon, builtin
from assay.checks.voice_transcript import ExactMatcher, FuzzyMatcher, PhraseMatcher, find_phrase

__all__ = [
    "GRID",
    "KINDS",
    "SET",
    "SPLITS",
    "Calibration",
    "Candidate",
    "Item",
    "Scores",
    "calibrate",
    "load_items",
    "matchers",
    "score",
    "score_thresholds",
    "semantic_candidates",
]

SET = Path(__file__).parents[1] / "fixtures" / "voice" / "labelled" / "phrases.yaml"
KINDS = ("exact", "typo", "paraphrase", "negative", "negation", "number")
SPLITS = ("calibration", "held-out")
_DEFAULT_MATCH = {"exact": True, "typo": True, "paraphrase": True}


@dataclass(frozen=True, slots=True)
class Item:
    phrase: str
    text: str
    match: bool
    kind: str
    topic: str
    split: str
    """`calibration` or `held-out` (by the phrase entry's position in the file)."""


def load_items(path: Path = SET) -> list[Item]:
    items = []
    for position, entry in enumerate(yaml.safe_load(path.read_text(encoding="utf-8"))):
        split = SPLITS[position % 2]
        for kind in KINDS:
            for raw in entry.get(kind, []):
                text, match = (raw["text"], raw["match"]) if isinstance(raw, dict) else (raw, None)
                if match is None:
                    match = _DEFAULT_MATCH.get(kind, False)
                items.append(Item(entry["phrase"], text, bool(match), kind, entry["topic"], split))
    return items


def matchers(names: Sequence[str]) -> list[PhraseMatcher]:
    """Matchers for tier names (`semantic` needs the extra; `vocabulary` is not a matcher: see
    `lexicon`)."""
    found: list[PhraseMatcher] = []
    for name in names:
        if name == "vocabulary":
            continue
        if name == "exact":
            found.append(ExactMatcher())
        elif name == "fuzzy":
            found.append(FuzzyMatcher())
        elif name == "semantic":
            from assay.checks._semantic import SemanticMatcher

            found.append(SemanticMatcher())
        else:
            raise ValueError(f"no offline matcher for tier {name!r}")
    return found


def lexicon(names: Sequence[str]) -> Lexicon | None:
    """The built-in lexicon when the tier names list `vocabulary`."""
    return builtin() if "vocabulary" in names else None


def predict(item: Item, tiers: Sequence[PhraseMatcher], vocabulary: Lexicon | None = None) -> dict[str, Any]:
    turns = [(0, "agent", normalise(item.text))]
    return find_phrase(item.phrase, "contains", turns, tiers, vocabulary)


@dataclass
class Scores:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    false_accepts: list[Item] = field(default_factory=list)
    misses: list[Item] = field(default_factory=list)

    def add(self, item: Item, found: bool) -> None:
        if item.match and found:
            self.tp += 1
        elif item.match:
            self.fn += 1
            self.misses.append(item)
        elif found:
            self.fp += 1
            self.false_accepts.append(item)
        else:
            self.tn += 1

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p and r else None

    @property
    def items(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def score(
    items: Iterable[Item], tiers: Sequence[PhraseMatcher], vocabulary: Lexicon | None = None
) -> dict[str, Scores]:
    """Scores per kind and `overall`; `negation` false accepts are the negation flips."""
    listed = list(items)
    return _tally(listed, [bool(predict(item, tiers, vocabulary)["found"]) for item in listed])


def _tally(items: Sequence[Item], found: Sequence[bool]) -> dict[str, Scores]:
    by_kind: dict[str, Scores] = {kind: Scores() for kind in (*KINDS, "overall")}
    for item, hit in zip(items, found, strict=True):
        by_kind[item.kind].add(item, hit)
        by_kind["overall"].add(item, hit)
    return by_kind


@dataclass(frozen=True, slots=True)
class Candidate:
    """One window tier 3 could propose for an item, with both of its signals."""

    cosine: float
    alignment: float
    guarded: bool
    """Whether the number and negation guards accept the window."""


def semantic_candidates(
    items: Sequence[Item], vocabulary: Lexicon | None = None
) -> list[tuple[bool, list[Candidate]]]:
    """Per item: whether the tiers before tier 3 already find the phrase (1-2, and the vocabulary's
    variants when given), and every tier-3 window's signals, for the phrase and each variant.

    One model pass per text; any pair of thresholds is then scored without the model
    (a window is proposed when both signals reach their thresholds, as in `SemanticMatcher`).
    """
    from assay.checks._semantic import _aligned, embedder, windows
    from assay.checks._speech import SpanMatch
    from assay.checks.voice_transcript import NEGATIONS, VARIANT_NEGATIONS, _guards_accept

    model, basic = embedder(), matchers(["exact", "fuzzy"])
    found = []
    for item in items:
        wanted, turn = normalise(item.phrase), normalise(item.text)
        cut = windows(turn)
        said = [(wanted, NEGATIONS)]
        if vocabulary is not None:
            said += [(variant.speech, VARIANT_NEGATIONS) for variant in vocabulary.variants(wanted)]
        candidates = []
        if cut:
            have = model.encode([w.text for w in cut])
            for speech, negations in said:
                (phrase,) = model.encode([speech.source])
                candidates += [
                    Candidate(
                        float(window_vectors.sentence @ phrase.sentence),
                        _aligned(phrase, window_vectors),
                        _guards_accept(speech, turn, SpanMatch(window.first, window.last, 1.0), negations),
                    )
                    for window, window_vectors in zip(cut, have, strict=True)
                ]
        found.append((bool(predict(item, basic, vocabulary)["found"]), candidates))
    return found


def score_thresholds(
    items: Sequence[Item], candidates: Sequence[tuple[bool, list[Candidate]]], cosine: float, alignment: float
) -> dict[str, Scores]:
    """`score` with tiers exact, fuzzy and semantic at the given thresholds, from `semantic_candidates`."""
    return _tally(
        items,
        [
            basic or any(c.guarded and c.cosine >= cosine and c.alignment >= alignment for c in windows)
            for basic, windows in candidates
        ],
    )


@dataclass(frozen=True, slots=True)
class Calibration:
    threshold: float
    alignment: float
    scores: dict[str, Scores]
    """On the calibration split."""


GRID = tuple(round(0.20 + 0.025 * i, 3) for i in range(31))
"""0.20, 0.225, … 0.95: the values tried for each threshold."""


def calibrate(items: Sequence[Item], candidates: Sequence[tuple[bool, list[Candidate]]]) -> Calibration:
    """Tier 3's thresholds, chosen on the calibration split only.

    Rule: tier 3 may add no false accept to what tiers 1-2 accept on the calibration split (so
    no negation flip and no number false accept either); among the pairs that keep to that, the
    one with the most recall, and on a tie the stricter pair (larger sum).
    """
    chosen = [(i, c) for i, c in zip(items, candidates, strict=True) if i.split == "calibration"]
    subset, windows = [i for i, _ in chosen], [c for _, c in chosen]
    floor = score_thresholds(subset, windows, 2.0, 2.0)["overall"].fp
    best: tuple[tuple[float, float], Calibration] | None = None
    for cosine in GRID:
        for alignment in GRID:
            scores = score_thresholds(subset, windows, cosine, alignment)
            if scores["overall"].fp > floor:
                continue
            key = (scores["overall"].recall or 0.0, cosine + alignment)
            if best is None or key > best[0]:
                best = (key, Calibration(cosine, alignment, scores))
    assert best is not None  # the strictest pair adds nothing, so one pair always qualifies
    return best[1]
