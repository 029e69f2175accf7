"""`voice-transcript` (SPEC §3.6)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from assay.core.assertions._base import TaggedAssertion

__all__ = ["VoiceTranscript"]


class VoiceTranscript(TaggedAssertion):
    assert_: Literal["voice-transcript"] = Field(alias="assert")
    speaker: Literal["agent", "caller", "ivr", "any"] = "any"
    contains: list[str] = Field(default_factory=list)
    """Phrases that must appear, each within one turn."""
    not_contains: list[str] = Field(default_factory=list)
    """Phrases that must not appear."""
