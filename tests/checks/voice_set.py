"""The labelled phrase set (tests/fixtures/voice/labelled/phrases.yaml) and its scores.

Shared by tests/checks/test_voice_labelled_set.py (thresholds asserted in CI) and
bench/bench_voice_matcher.py (the full table). Each item is one agent turn and one phrase,
judged as a `contains` phrase on a one-turn transcript with the given tiers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.checks._speech import normalise
from assay.checks.voice_transcript import ExactMatcher, FuzzyMatcher, PhraseMatcher, find_phrase

__all__ = ["KINDS", "SET", "Item", "Scores", "load_items", "matchers", "score"]

SET = Path(__file__).parents[1] / "fixtures" / "voice" / "labelled" / "phrases.yaml"
KINDS = ("exact", "typo", "paraphrase", "negative", "negation", "number")
_DEFAULT_MATCH = {"exact": True, "typo": True, "paraphrase": True}


@dataclass(frozen=True, slots=True)
class Item:
    phrase: str
    text: str
    match: bool
    kind: str
    topic: str


def load_items(path: Path = SET) -> list[Item]:
    items = []
    for entry in yaml.safe_load(path.read_text(encoding="utf-8")):
        for kind in KINDS:
            for raw in entry.get(kind, []):
                text, match = (raw["text"], raw["match"]) if isinstance(raw, dict) else (raw, None)
                if match is None:
                    match = _DEFAULT_MATCH.get(kind, False)
                items.append(Item(entry["phrase"], text, bool(match), kind, entry["topic"]))
    return items


def matchers(names: Sequence[str]) -> list[PhraseMatcher]:
    """Matchers for tier names (`semantic` needs the extra)."""
    found: list[PhraseMatcher] = []
    for name in names:
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


def predict(item: Item, tiers: Sequence[PhraseMatcher]) -> dict[str, Any]:
    turns = [(0, "agent", normalise(item.text))]
    return find_phrase(item.phrase, "contains", turns, tiers)


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


def score(items: Iterable[Item], tiers: Sequence[PhraseMatcher]) -> dict[str, Scores]:
    """Scores per kind and `overall`; `negation` false accepts are the negation flips."""
    by_kind: dict[str, Scores] = {kind: Scores() for kind in (*KINDS, "overall")}
    for item in items:
        found = bool(predict(item, tiers)["found"])
        by_kind[item.kind].add(item, found)
        by_kind["overall"].add(item, found)
    return by_kind
