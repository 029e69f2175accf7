"""`voice-transcript` (SPEC §3.6)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from assay.core.assertions._base import TaggedAssertion

__all__ = ["TIER_ORDER", "Tier", "VoiceTranscript"]


def _has_words(phrase: str) -> str:
    """A phrase with no letter or digit normalises to nothing and would match everywhere."""
    if not any(char.isalnum() for char in phrase):
        raise ValueError(f"phrase {phrase!r} has no words to match")
    return phrase


Phrase = Annotated[str, AfterValidator(_has_words)]
Tier = Literal["exact", "fuzzy", "semantic", "judge"]
TIER_ORDER: tuple[Tier, ...] = ("exact", "fuzzy", "semantic", "judge")
"""SPEC §3.6's tiers, in the order they are tried."""


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
    """Tiers to use, tried in SPEC order whatever the order given; default `exact`, `fuzzy`, plus
    `semantic` when the deployment sets `ASSAY_VOICE_SEMANTIC=1` and `judge` when `ASSAY_JUDGE_URL`
    is set. `not_contains` uses `exact` and `fuzzy` only, as listed."""
