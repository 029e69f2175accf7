"""What the deployment adds to grading: the semantic voice tier and the LLM judge.

Built once at start-up from `Settings` (`ASSAY_VOICE_SEMANTIC`, `ASSAY_JUDGE_*`) and handed to
`complete` and `rescore`, which pass it on to `verify_task`; the core never reads the
environment or talks HTTP itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from assay.core.judging import Judge

__all__ = ["Grading"]


@dataclass(frozen=True, slots=True)
class Grading:
    semantic: bool = False
    """Tier 3 of `voice-transcript` for every voice criterion (`ASSAY_VOICE_SEMANTIC=1`)."""
    judge: Judge | None = None
    """The live judge (`ASSAY_JUDGE_URL`), or None."""
