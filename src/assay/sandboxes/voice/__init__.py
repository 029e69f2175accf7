"""The voice sandbox: a call's transcript, seeded by datasets and scenarios, written by the agent."""

from __future__ import annotations

from assay.sandboxes.voice.surface import VoiceSandbox

__all__ = ["VoiceSandbox"]
