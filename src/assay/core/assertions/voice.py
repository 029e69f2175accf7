"""`voice-transcript` (docs/assertions.md) and `voice-call` (what happened on a phone-line call)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from assay.core.assertions._base import StrictModel, TaggedAssertion

__all__ = ["CALL_FIELDS", "TIER_ORDER", "ReferenceTarget", "Tier", "VoiceCall", "VoiceTranscript"]


def _has_words(phrase: str) -> str:
    """A phrase with no letter or digit normalises to nothing and would match everywhere."""
    if not any(char.isalnum() for char in phrase):
        raise ValueError(f"phrase {phrase!r} has no words to match")
    return phrase


Phrase = Annotated[str, AfterValidator(_has_words)]
Tier = Literal["exact", "fuzzy", "semantic", "judge"]
TIER_ORDER: tuple[Tier, ...] = ("exact", "fuzzy", "semantic", "judge")
"""The match tiers of `voice-transcript` (docs/assertions.md), in the order they are tried."""


def _has_exact(tiers: list[Tier] | None) -> list[Tier] | None:
    """Tier 1 always runs: without it `not_contains` would have nothing to search with."""
    if tiers is not None and "exact" not in tiers:
        raise ValueError("tiers must include exact (tier 1 always runs)")
    return tiers


class VoiceTranscript(TaggedAssertion):
    assert_: Literal["voice-transcript"] = Field(alias="assert")
    speaker: Literal["agent", "caller", "ivr", "rep", "any"] = "any"
    source: Literal["line", "reported", "any"] = "any"
    """`line`: only turns the sandbox's phone line recorded (a call the agent really made);
    `reported`: only turns posted to `voice/turns`; `any` (the default): every turn."""
    contains: list[Phrase] = Field(default_factory=list)
    """Phrases that must appear, each within one turn."""
    not_contains: list[Phrase] = Field(default_factory=list)
    """Phrases that must not appear."""
    tiers: Annotated[list[Tier] | None, AfterValidator(_has_exact)] = None
    """Tiers to use, tried in the documented order whatever the order given; default `exact`, `fuzzy`, plus
    `semantic` when the deployment sets `ASSAY_VOICE_SEMANTIC=1` and `judge` when `ASSAY_JUDGE_URL`
    is set. `not_contains` uses `exact` and `fuzzy` only, as listed."""
    vocabulary: bool = True
    """Also search each phrase said in the trade's other words (the built-in healthcare-administration
    lexicon plus the benchmark's `vocabulary`), after `exact` and `fuzzy`; `false` turns it off."""


class ReferenceTarget(StrictModel):
    """Where the agent should have written the call's reference number."""

    surface: Literal["portal", "fhir", "files"]
    resource: str | None = None
    """`portal`: the resource whose rows are searched (required); `fhir`: the resource type
    (required); `files`: unused — every uploaded file is searched."""

    @model_validator(mode="after")
    def _named(self) -> ReferenceTarget:
        if self.surface in ("portal", "fhir") and not self.resource:
            raise ValueError(f"a {self.surface} target needs resource")
        return self


Bound = Annotated[int, Field(ge=0)]


class VoiceCall(TaggedAssertion):
    """What happened on a call the sandbox's phone line recorded (`source: line`); every field
    given must hold for one call (the best call is reported)."""

    assert_: Literal["voice-call"] = Field(alias="assert")
    reached: Literal["ivr", "rep"] | None = None
    """`rep`: a representative spoke on the call."""
    verified: bool | None = None
    """The representative verified the caller."""
    verified_before_asking: bool | None = None
    """Verified, and never refused for asking about the member before verifying."""
    dtmf_path: list[Annotated[str, Field(pattern=r"^[0-9*#]+$")]] | None = None
    """The agent's key presses on the call begin with these entries, in order."""
    reference_captured_in: list[ReferenceTarget] | None = None
    """The reference number the line gave appears in one of these places of the final state."""
    caller_outcome: Literal["stop", "transfer", "out_of_scope", "gave_up"] | None = None
    """An inbound call: how the simulated caller ended it (`stop`: the agent confirmed its request)."""
    max_duration_ms: Bound | None = None
    max_first_word_ms: Bound | None = None
    """The agent's first response after the line's first words stopped."""
    max_latency_p50_ms: Bound | None = None
    max_latency_ms: Bound | None = None
    max_talk_over: Bound | None = None
    """Agent turns that began before the line stopped speaking."""

    @model_validator(mode="after")
    def _asks_something(self) -> VoiceCall:
        if all(getattr(self, name) is None for name in CALL_FIELDS):
            raise ValueError(f"voice-call needs at least one of {', '.join(CALL_FIELDS)}")
        return self


CALL_FIELDS = (
    "reached",
    "verified",
    "verified_before_asking",
    "dtmf_path",
    "reference_captured_in",
    "caller_outcome",
    "max_duration_ms",
    "max_first_word_ms",
    "max_latency_p50_ms",
    "max_latency_ms",
    "max_talk_over",
)
