"""What a check may know beyond its assertion and the state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.checks.vocabulary import Lexicon
from assay.core.judging import Judge

__all__ = ["CheckContext"]


@dataclass(frozen=True, slots=True)
class CheckContext:
    input_entity: Mapping[str, Any] | None = None
    """The criterion's input entity (its `input_entity_id`), else the task's (docs/assertions.md)."""
    semantic: bool = False
    """Whether the deployment turned the semantic voice tier on (`ASSAY_VOICE_SEMANTIC=1`)."""
    judge: Judge | None = None
    """The LLM judge (`ASSAY_JUDGE_URL`), or a replay of recorded verdicts on `rescore`."""
    lexicon: Lexicon | None = None
    """The vocabulary tier's lexicon: the built-in one (None) or it plus the benchmark's entries."""
    vocabulary_problem: str | None = None
    """Why the benchmark's frozen `vocabulary` cannot be read (a voice criterion using the
    vocabulary is then an `error`, never judged with part of it)."""
