"""What a check may know beyond its assertion and the state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.core.judging import Judge

__all__ = ["CheckContext"]


@dataclass(frozen=True, slots=True)
class CheckContext:
    input_entity: Mapping[str, Any] | None = None
    """The criterion's input entity (its `input_entity_id`), else the task's (SPEC §3.4)."""
    semantic: bool = False
    """Whether the deployment turned the semantic voice tier on (`ASSAY_VOICE_SEMANTIC=1`)."""
    judge: Judge | None = None
    """The LLM judge (`ASSAY_JUDGE_URL`), or a replay of recorded verdicts on `rescore`."""
