"""The check registry: one module per `assert`, one line each here (docs/assertions.md).

Each module exposes `check(assertion, state, context) -> CriterionResult`. A check returns a failed
result for bad data and never raises; anything it does raise is a bug that `verify_task` records
as `status: "error"`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.checks import (
    fhir_resource_state,
    hl7_structural,
    natural_language,
    no_unexpected_changes,
    portal_state_match,
    sftp_file_present,
    voice_call,
    voice_transcript,
    x12_response,
)
from assay.checks._context import CheckContext
from assay.checks._semantic import load_semantic_model, semantic_unavailable, use_model
from assay.core.results import CriterionResult
from assay.core.state import SandboxState

__all__ = [
    "CHECKS",
    "PREPARE",
    "Check",
    "CheckContext",
    "load_semantic_model",
    "semantic_unavailable",
    "use_model",
]

Check = Callable[[Any, SandboxState, CheckContext], CriterionResult]

CHECKS: dict[str, Check] = {
    "fhir-resource-state": fhir_resource_state.check,
    "hl7-structural": hl7_structural.check,
    "natural-language": natural_language.check,
    "no-unexpected-changes": no_unexpected_changes.check,
    "portal-state-match": portal_state_match.check,
    "sftp-file-present": sftp_file_present.check,
    "voice-call": voice_call.check,
    "voice-transcript": voice_transcript.check,
    "x12-response": x12_response.check,
}

PREPARE: dict[str, Callable[[Any, CheckContext], None]] = {
    "voice-transcript": voice_transcript.prepare,
}
"""Set-up a check needs before its time limit starts (loading a model), by `assert`."""
