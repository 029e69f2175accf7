"""`voice-transcript`: phrases that must, and must not, appear in the call (SPEC §3.6).

The transcript is the target and always exists. Each phrase is searched turn by turn (a phrase
matches within one turn) through a list of tiers, in order; the first tier that finds a match the
guards accept decides, and its name is recorded as `method`:

1. `exact` — the phrase's normalised words appear, in order and whole, in the turn's (`_speech`);
2. `fuzzy` — `rapidfuzz.fuzz.partial_ratio` ≥ 90 on the normalised texts, best turn wins;
3. semantic and 4. LLM judge — optional `contains` tiers behind the `PhraseMatcher` protocol, not
   shipped: the default install runs offline (docs/decisions.md).

Two guards check every tier's match, so a near-match never flips meaning: numbers in the phrase
and in the matched span must agree, and the span (or the three words before it) must not hold a
negation the phrase lacks — nor lack one the phrase holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, Protocol

from rapidfuzz import fuzz

from assay.checks._context import CheckContext
from assay.checks._fields import matched_details
from assay.checks._speech import Speech, normalise
from assay.core.assertions import VoiceTranscript
from assay.core.results import CriterionResult
from assay.core.state import SandboxState

__all__ = ["CONTAINS_TIERS", "FUZZY_THRESHOLD", "NOT_CONTAINS_TIERS", "PhraseMatcher", "SpanMatch", "check"]

FUZZY_THRESHOLD = 90.0
NEGATIONS = frozenset({"no", "not", "never", "without", "none", "neither", "nor"})
"""SPEC §3.6's negations; `n't` and `cannot` arrive as a `not` token (see `_speech`)."""
_WORDS_BEFORE = 3

PhraseKind = Literal["contains", "not_contains"]


@dataclass(frozen=True, slots=True)
class SpanMatch:
    """Where a tier found a phrase in one turn: tokens `first..last` of the turn, inclusive."""

    first: int
    last: int
    similarity: float
    """In [0, 1]: 1.0 for exact, partial_ratio / 100 for fuzzy."""


class PhraseMatcher(Protocol):
    """One matching tier. Proposes spans, best first; the guards then accept or reject each."""

    method: str

    def spans(self, phrase: Speech, turn: Speech) -> Iterator[SpanMatch]: ...


class ExactMatcher:
    """Tier 1: the phrase's normalised words, whole and in order, anywhere in the turn."""

    method = "exact"

    def spans(self, phrase: Speech, turn: Speech) -> Iterator[SpanMatch]:
        if f" {phrase.text} " not in f" {turn.text} ":
            return
        wanted, have = phrase.all_words, turn.all_words
        size = len(wanted)
        for first in range(len(have) - size + 1):
            if have[first : first + size] == wanted:
                yield SpanMatch(first, first + size - 1, 1.0)


class FuzzyMatcher:
    """Tier 2: `partial_ratio_alignment` ≥ 90, confirmed on whole words.

    `partial_ratio` aligns characters, so "no" scores 100 inside "know". The aligned stretch is
    widened to the tokens it touches and must still score ≥ 90 by `fuzz.ratio` against the
    phrase; that whole-word score is the reported `similarity`.
    """

    method = "fuzzy"

    def spans(self, phrase: Speech, turn: Speech) -> Iterator[SpanMatch]:
        if not turn.tokens:
            return
        needle, haystack = phrase.text, turn.text
        if len(haystack) < len(needle):
            first, last = 0, len(turn.tokens) - 1
        else:
            found = fuzz.partial_ratio_alignment(needle, haystack, score_cutoff=FUZZY_THRESHOLD)
            if found is None or found.score < FUZZY_THRESHOLD:
                return
            first, last = _tokens_covering(turn, found.dest_start, found.dest_end)
        score = fuzz.ratio(needle, " ".join(turn.words(first, last)))
        if score >= FUZZY_THRESHOLD:
            yield SpanMatch(first, last, score / 100)


def _tokens_covering(turn: Speech, start: int, end: int) -> tuple[int, int]:
    """Indexes of the first and last tokens that characters `start..end-1` of `turn.text` touch."""
    offsets = turn.token_offsets()
    ends = [at + len(token.text) for at, token in zip(offsets, turn.tokens, strict=True)]
    first = next((i for i, token_end in enumerate(ends) if token_end > start), len(ends) - 1)
    last = max((i for i, at in enumerate(offsets) if at < max(end, start + 1)), default=first)
    return first, max(first, last)


CONTAINS_TIERS: tuple[PhraseMatcher, ...] = (ExactMatcher(), FuzzyMatcher())
"""Tiers for `contains`. Semantic (3) and LLM-judge (4) matchers would be appended here."""
NOT_CONTAINS_TIERS: tuple[PhraseMatcher, ...] = (ExactMatcher(), FuzzyMatcher())
"""`not_contains` uses tiers 1–2 only (SPEC §3.6)."""


def check(assertion: VoiceTranscript, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge every phrase on the recorded turns; never raises for bad data."""
    turns = [
        (index, turn.speaker, normalise(turn.text))
        for index, turn in enumerate(state.voice_turns())
        if assertion.speaker == "any" or turn.speaker.casefold() == assertion.speaker
    ]
    results = [_judge_phrase(p, "contains", turns, CONTAINS_TIERS) for p in assertion.contains]
    results += [_judge_phrase(p, "not_contains", turns, NOT_CONTAINS_TIERS) for p in assertion.not_contains]
    passed = sum(result["passed"] for result in results)
    score = Fraction(passed, len(results)) if results else Fraction(1)
    details = matched_details("Transcript", passed, len(results), noun="phrase")
    return CriterionResult(score, details, {"phraseResults": results})


def _judge_phrase(
    phrase: str,
    kind: PhraseKind,
    turns: Sequence[tuple[int, str, Speech]],
    tiers: Sequence[PhraseMatcher],
) -> dict[str, Any]:
    wanted = normalise(phrase)
    if not wanted.tokens:
        return _result(phrase, kind, found=False)
    for tier in tiers:
        best: tuple[SpanMatch, int, str, Speech] | None = None
        for index, speaker, turn in turns:
            span = next((s for s in tier.spans(wanted, turn) if _guards_accept(wanted, turn, s)), None)
            if span is not None and (best is None or span.similarity > best[0].similarity):
                best = (span, index, speaker, turn)
                if span.similarity >= 1.0:
                    break
        if best is not None:
            span, index, speaker, turn = best
            return _result(
                phrase,
                kind,
                found=True,
                turn=index,
                speaker=speaker,
                text=turn.span(span.first, span.last),
                method=tier.method,
                similarity=round(span.similarity, 4),
            )
    return _result(phrase, kind, found=False)


def _guards_accept(phrase: Speech, turn: Speech, span: SpanMatch) -> bool:
    """The number guard and the negation guard (SPEC §3.6), on any tier's span."""
    last_phrase = len(phrase.tokens) - 1
    if phrase.numbers(0, last_phrase) != turn.numbers(span.first, span.last):
        return False
    phrase_negated = bool(NEGATIONS.intersection(phrase.words(0, last_phrase)))
    context = turn.words_before(span.first, _WORDS_BEFORE) + turn.words(span.first, span.last)
    return phrase_negated == bool(NEGATIONS.intersection(context))


def _result(
    phrase: str,
    kind: PhraseKind,
    *,
    found: bool,
    turn: int | None = None,
    speaker: str | None = None,
    text: str | None = None,
    method: str | None = None,
    similarity: float | None = None,
) -> dict[str, Any]:
    return {
        "phrase": phrase,
        "kind": kind,
        "found": found,
        "passed": found if kind == "contains" else not found,
        "turn": turn,
        "speaker": speaker,
        "text": text,
        "method": method,
        "similarity": similarity,
    }
