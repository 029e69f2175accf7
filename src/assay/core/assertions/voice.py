"""`voice-transcript` (SPEC §3.6)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from assay.core.assertions._base import TaggedAssertion

__all__ = ["VoiceTranscript"]


def _has_words(phrase: str) -> str:
    """A phrase with no letter or digit normalises to nothing and would match everywhere."""
    if not any(char.isalnum() for char in phrase):
        raise ValueError(f"phrase {phrase!r} has no words to match")
    return phrase


Phrase = Annotated[str, AfterValidator(_has_words)]


class VoiceTranscript(TaggedAssertion):
    assert_: Literal["voice-transcript"] = Field(alias="assert")
    speaker: Literal["agent", "caller", "ivr", "any"] = "any"
    contains: list[Phrase] = Field(default_factory=list)
    """Phrases that must appear, each within one turn."""
    not_contains: list[Phrase] = Field(default_factory=list)
    """Phrases that must not appear."""
