"""`voice-transcript`: phrases that must, and must not, appear in the call (docs/assertions.md).

The transcript is the target and always exists. Each phrase is searched turn by turn (a phrase
matches within one turn) through a list of tiers, in order; the first tier that finds a match the
guards accept decides, and its name is recorded as `method`:

1. `exact` — the phrase's normalised words appear, in order and whole, in the turn's (`_speech`);
2. `fuzzy` — `rapidfuzz.fuzz.partial_ratio` ≥ 90 on the normalised texts, best turn wins;
   then `vocabulary` — the phrase said in the trade's other words (`checks/vocabulary`: "DOB" for
   "date of birth", "precertification" for "prior authorization"), each variant through tier 1
   (and tier 3, after the phrase itself, when it is on; not tier 2, see `VARIANT_TIERS`); on
   unless the criterion says `vocabulary: false`. Its evidence names the variant, the lexicon
   entries and the tier;
3. `semantic` — sentence embeddings (`_semantic`), when the deployment turns it on
   (`ASSAY_VOICE_SEMANTIC=1`) or the criterion lists it in `tiers`; needs the `semantic` extra;
4. `judge` — the LLM judge, asked about each `contains` phrase tiers 1–3 did not find, when one
   is configured (`ASSAY_JUDGE_URL`) or listed in `tiers`; its answer is recorded in the evidence.

The default install runs tiers 1–2 and the vocabulary: offline and deterministic
(docs/decisions/voice.md).

Two guards check every tier's match, so a near-match never flips meaning: numbers in the phrase
(or the variant) and in the matched span must agree, and the span (or the three words before it)
must not hold a negation the phrase lacks — nor lack one the phrase holds. For a variant "non"
counts as a negation too, so "participating" is never found in "non-participating". A
`not_contains` phrase is searched with its variants as well; when none is found, the evidence
lists the variants that were ruled out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, Protocol

from rapidfuzz import fuzz

from assay.checks import _semantic
from assay.checks._context import CheckContext
from assay.checks._fields import matched_details
from assay.checks._judging import JudgeGarbage, ask_judge, load_prompt
from assay.checks._speech import SpanMatch, Speech, normalise
from assay.checks.vocabulary import NEGATED_PREFIXES, Lexicon, Variant, builtin
from assay.core.assertions import VoiceTranscript
from assay.core.assertions.voice import TIER_ORDER
from assay.core.judging import Judge, JudgeUnavailable
from assay.core.results import CriterionResult
from assay.core.state import SandboxState

__all__ = [
    "CONTAINS_TIERS",
    "FUZZY_THRESHOLD",
    "NOT_CONTAINS_TIERS",
    "PhraseMatcher",
    "SpanMatch",
    "check",
    "find_phrase",
    "prepare",
]

FUZZY_THRESHOLD = 90.0
NEGATIONS = frozenset({"no", "not", "never", "without", "none", "neither", "nor"})
"""The negations `voice-transcript` knows (docs/assertions.md); `n't` and `cannot` arrive as a `not` token
(see `_speech`)."""
VARIANT_NEGATIONS = NEGATIONS | NEGATED_PREFIXES
VARIANT_TIERS = frozenset({"exact", "semantic"})
"""Tiers a vocabulary variant goes through. Not `fuzzy`: a near-spelling of a synonym stacks two
approximations; at tier 2's bar it adds a false accept on the labelled set's calibration split, and
at a stricter one it finds one more item there for six times the cost (docs/decisions/voice.md)."""
_WORDS_BEFORE = 3

PhraseKind = Literal["contains", "not_contains"]


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
"""Tiers 1–2, for `contains` by default; tier 3 is appended when it is on (`_plan`)."""
NOT_CONTAINS_TIERS: tuple[PhraseMatcher, ...] = (ExactMatcher(), FuzzyMatcher())
"""`not_contains` uses tiers 1–2 only (docs/assertions.md)."""
JUDGE_PROMPT = ("voice-phrase", 1)
JUDGE_TRANSCRIPT_BUDGET = 24_000
"""Characters of transcript shown to the judge; longer calls are cut, and the cut is said."""

Turns = Sequence[tuple[int, str, Speech]]


@dataclass(frozen=True, slots=True)
class _Plan:
    names: tuple[str, ...]
    contains: tuple[PhraseMatcher, ...]
    not_contains: tuple[PhraseMatcher, ...]
    judge: Judge | None
    vocabulary: Lexicon | None


def check(assertion: VoiceTranscript, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge every phrase on the recorded turns; never raises for bad data."""
    plan = _plan(assertion, context)
    if isinstance(plan, CriterionResult):
        return plan
    turns = [
        (index, turn.speaker, normalise(turn.text))
        for index, turn in enumerate(state.voice_turns())
        if (assertion.speaker == "any" or turn.speaker.casefold() == assertion.speaker)
        and (assertion.source == "any" or turn.source == assertion.source)
        and turn.kind == "speech"  # key presses and line events are not speech
    ]
    results = [find_phrase(p, "contains", turns, plan.contains, plan.vocabulary) for p in assertion.contains]
    if plan.judge is not None and turns:
        for i, result in enumerate(results):
            if result["found"]:
                continue
            try:
                results[i] = _ask_judge(plan.judge, result["phrase"], turns)
            except (JudgeUnavailable, JudgeGarbage) as exc:
                return CriterionResult.error(f"LLM judge could not decide {result['phrase']!r}: {exc}")
    results += [
        find_phrase(p, "not_contains", turns, plan.not_contains, plan.vocabulary)
        for p in assertion.not_contains
    ]
    recorded = state.voice_turns()
    for result in results:  # a turn the phone line recorded is named by its call too
        if isinstance(result.get("turn"), int) and recorded[result["turn"]].call_id:
            result["call_id"] = recorded[result["turn"]].call_id
    passed = sum(result["passed"] for result in results)
    score = Fraction(passed, len(results)) if results else Fraction(1)
    details = matched_details("Transcript", passed, len(results), noun="phrase")
    evidence: dict[str, Any] = {"phraseResults": results, "tiers": list(plan.names)}
    if "semantic" in plan.names:
        evidence["semantic"] = {
            "model": _semantic.MODEL_ID,
            "threshold": _semantic.THRESHOLD,
            "alignment": _semantic.ALIGNMENT,
        }
    if plan.vocabulary is not None:
        evidence["vocabulary"] = plan.vocabulary.describe()
    return CriterionResult(score, details, evidence)


def prepare(assertion: VoiceTranscript, context: CheckContext) -> None:
    """Load the semantic model before the check's time limit starts (once per process): loading
    is set-up, not judging, and on a busy machine it can take longer than the limit."""
    plan = _plan(assertion, context)
    if isinstance(plan, _Plan) and "semantic" in plan.names:
        _semantic.embedder().load()


def _plan(assertion: VoiceTranscript, context: CheckContext) -> _Plan | CriterionResult:
    """The tiers this criterion uses: its own `tiers`, else 1–2 plus what the deployment turned on.

    A tier the criterion asks for that cannot run here is an `error`, never a quiet skip.
    """
    names: tuple[str, ...]
    if assertion.tiers is not None:
        names = tuple(t for t in TIER_ORDER if t in assertion.tiers)
    else:
        names = ("exact", "fuzzy", *(("semantic",) if context.semantic else ()))
        names += ("judge",) if context.judge is not None else ()
    if "semantic" in names and (reason := _semantic.semantic_unavailable()):
        return CriterionResult.error(reason)
    vocabulary = None
    if assertion.vocabulary:
        if context.vocabulary_problem:
            return CriterionResult.error(
                f"the benchmark's vocabulary cannot be used: {context.vocabulary_problem}"
            )
        vocabulary = context.lexicon or builtin()
        after = sum(name in _BASIC for name in names)
        names = (*names[:after], "vocabulary", *names[after:])
    if "judge" in names and context.judge is None:
        return CriterionResult.error(
            "the judge tier was asked for but no LLM judge is configured (set ASSAY_JUDGE_URL)"
        )
    basic: dict[str, PhraseMatcher] = {"exact": ExactMatcher(), "fuzzy": FuzzyMatcher()}
    first_two = tuple(basic[n] for n in names if n in basic)
    semantic: tuple[PhraseMatcher, ...] = (_semantic.SemanticMatcher(),) if "semantic" in names else ()
    judge = context.judge if "judge" in names else None
    return _Plan(names, first_two + semantic, first_two, judge, vocabulary)


def find_phrase(
    phrase: str,
    kind: PhraseKind,
    turns: Turns,
    tiers: Sequence[PhraseMatcher],
    vocabulary: Lexicon | None = None,
) -> dict[str, Any]:
    """One phrase's evidence entry: the first tier whose best guarded match is found decides.

    With a `vocabulary`, the phrase's variants are tried after tiers 1–2 found the phrase itself
    nowhere, each through `exact`; then the phrase and then its variants through the tiers after
    them (semantic): a variant never outranks the phrase in the same tier.
    """
    wanted = normalise(phrase)
    if not wanted.tokens:
        return _result(phrase, kind, found=False)
    variants = vocabulary.variants(wanted) if vocabulary is not None else []
    basic = [tier for tier in tiers if tier.method in _BASIC]
    later = [tier for tier in tiers if tier.method not in _BASIC]
    stages: list[tuple[PhraseMatcher, Variant | None]] = [(tier, None) for tier in basic]
    stages += [(tier, variant) for tier in basic if tier.method in VARIANT_TIERS for variant in variants]
    for tier in later:
        stages += [(tier, None)]
        stages += [(tier, variant) for variant in variants if tier.method in VARIANT_TIERS]
    warmed: set[int] = set()
    for tier, variant in stages:
        warm = getattr(tier, "warm", None)
        if variant is not None and warm is not None and id(tier) not in warmed:
            warmed.add(id(tier))
            warm([v.speech for v in variants])
        found = _best(wanted if variant is None else variant.speech, turns, tier, variant is not None)
        if found is None:
            continue
        span, index, speaker, turn = found
        result = _result(
            phrase,
            kind,
            found=True,
            turn=index,
            speaker=speaker,
            text=turn.span(span.first, span.last),
            method=tier.method if variant is None else "vocabulary",
            similarity=round(span.similarity, 4),
        )
        if variant is not None:
            result["vocabulary"] = _variant_evidence(variant, tier.method)
        return result
    result = _result(phrase, kind, found=False)
    if variants:
        result["variantsRuledOut"] = [_variant_evidence(v) for v in variants]
    return result


_BASIC = frozenset({"exact", "fuzzy"})


def _best(
    wanted: Speech, turns: Turns, tier: PhraseMatcher, variant: bool
) -> tuple[SpanMatch, int, str, Speech] | None:
    """The tier's most similar guarded span over all turns (the first perfect one ends the search)."""
    negations = VARIANT_NEGATIONS if variant else NEGATIONS
    best: tuple[SpanMatch, int, str, Speech] | None = None
    for index, speaker, turn in turns:
        span = next((s for s in tier.spans(wanted, turn) if _guards_accept(wanted, turn, s, negations)), None)
        if span is not None and (best is None or span.similarity > best[0].similarity):
            best = (span, index, speaker, turn)
            if span.similarity >= 1.0:
                break
    return best


def _variant_evidence(variant: Variant, method: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "variant": variant.text,
        "entries": list(variant.entries),
        "replaced": [{"term": said, "by": by} for said, by in variant.replaced],
    }
    if method is not None:
        body["tier"] = method
    return body


def _ask_judge(judge: Judge, phrase: str, turns: Turns) -> dict[str, Any]:
    """Tier 4: the judge names a turn and quotes it; the guards still have the last word."""
    lines = [f"[{index}] {speaker}: {turn.source}" for index, speaker, turn in turns]
    transcript = "\n".join(lines)
    if len(transcript) > JUDGE_TRANSCRIPT_BUDGET:
        transcript = transcript[:JUDGE_TRANSCRIPT_BUDGET] + "\n[… transcript cut here]"
    question = load_prompt(*JUDGE_PROMPT).question(phrase=phrase, transcript=transcript)
    by_index = {index: (speaker, turn) for index, speaker, turn in turns}
    (found, index, quote), answer = ask_judge(judge, question, lambda a: _read_judge(a, by_index))
    record = answer.record(question, {"found": found, "turn": index, "quote": quote})
    if not found or index is None:
        return {**_result(phrase, "contains", found=False), "judge": record}
    speaker, turn = by_index[index]
    wanted = normalise(phrase)
    span = _locate(normalise(quote or ""), turn)
    if not _guards_accept(wanted, turn, span):
        record["rejected_by"] = "number or negation guard"
        return {**_result(phrase, "contains", found=False), "judge": record}
    return {
        **_result(
            phrase,
            "contains",
            found=True,
            turn=index,
            speaker=speaker,
            text=turn.span(span.first, span.last),
            method="judge",
        ),
        "judge": record,
    }


def _read_judge(
    answer: dict[str, Any], turns: dict[int, tuple[str, Speech]]
) -> tuple[bool, int | None, str | None]:
    found, index, quote = answer.get("found"), answer.get("turn"), answer.get("quote")
    if not isinstance(found, bool) or (found and (not isinstance(index, int) or isinstance(index, bool))):
        raise JudgeGarbage(f'expected {{"found": true|false, "turn": n, "quote": "…"}}, got {answer!r}'[:300])
    if found and index not in turns:
        raise JudgeGarbage(f"the judge named turn {index}, which is not one of the turns it was shown")
    if quote is not None and not isinstance(quote, str):
        raise JudgeGarbage(f"the judge's quote is not a string: {quote!r}"[:300])
    return found, index if found else None, quote


def _locate(quote: Speech, turn: Speech) -> SpanMatch:
    """The judge's quote inside its turn (exact, then fuzzy); the whole turn when not found,
    so the guards read at least everything the judge could have meant."""
    if quote.tokens:
        for tier in (ExactMatcher(), FuzzyMatcher()):
            span = next(tier.spans(quote, turn), None)
            if span is not None:
                return span
    return SpanMatch(0, max(len(turn.tokens) - 1, 0), 0.0)


def _guards_accept(
    phrase: Speech, turn: Speech, span: SpanMatch, negations: frozenset[str] = NEGATIONS
) -> bool:
    """The number guard and the negation guard (docs/assertions.md), on any tier's span."""
    if not turn.tokens:
        return False
    last_phrase = len(phrase.tokens) - 1
    if phrase.numbers(0, last_phrase) != turn.numbers(*_whole_numbers(turn, span)):
        return False
    phrase_negated = bool(negations.intersection(phrase.words(0, last_phrase)))
    context = turn.words_before(span.first, _WORDS_BEFORE) + turn.words(span.first, span.last)
    return phrase_negated == bool(negations.intersection(context))


def _whole_numbers(turn: Speech, span: SpanMatch) -> tuple[int, int]:
    """The span widened over digits that continue a number at its edge: punctuation splits
    `9:30` into `9` `30`, and a span that stops at `9` must not pass the number guard as 9."""
    words, first, last = turn.all_words, span.first, span.last
    while last + 1 < len(words) and words[last][-1:].isdigit() and words[last + 1][:1].isdigit():
        last += 1
    while first > 0 and words[first][:1].isdigit() and words[first - 1][-1:].isdigit():
        first -= 1
    return first, last


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
