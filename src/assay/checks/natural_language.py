"""`natural-language`: a free-text eval scored by the LLM judge (docs/assertions.md).

The judge reads what the run left that can be listed without knowing what to look for: the call
transcript, the HL7 messages sent, the X12 responses received and the files present (FHIR and
portal state are searched by type and key, so a free-text eval cannot name them; a typed
criterion should judge those). Its answer is recorded in the evidence, raw, with the model,
prompt version, latency and token counts, so `rescore` can replay it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from assay.checks._context import CheckContext
from assay.checks._judging import JudgeGarbage, ask_judge, load_prompt
from assay.core.assertions import NaturalLanguage
from assay.core.judging import JudgeUnavailable
from assay.core.results import CriterionResult
from assay.core.state import SandboxState

__all__ = ["NO_JUDGE", "check"]

PROMPT = ("natural-language", 1)
NO_JUDGE = "natural-language eval needs an LLM judge and none is configured (set ASSAY_JUDGE_URL)"
STATE_BUDGET = 24_000
"""Characters of recorded state shown to the judge; past it the digest says it was cut."""


def check(assertion: NaturalLanguage, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Ask the judge whether the eval holds on the recorded state; never raises for bad data."""
    if context.judge is None:
        return CriterionResult.unsupported(NO_JUDGE, {"text": assertion.text})
    question = load_prompt(*PROMPT).question(eval=assertion.text, state=state_digest(state))
    try:
        (verdict, reason), answer = ask_judge(context.judge, question, _read)
    except (JudgeUnavailable, JudgeGarbage) as exc:
        return CriterionResult.error(f"LLM judge could not decide: {exc}")
    evidence = {"text": assertion.text, "judge": answer.record(question, verdict)}
    holds = verdict == "pass"
    details = f"LLM judge ({answer.model}) {'passed' if holds else 'failed'} the eval: {reason}"
    return CriterionResult(Fraction(int(holds)), details, evidence)


def _read(answer: dict[str, Any]) -> tuple[str, str]:
    verdict, reason = answer.get("verdict"), answer.get("reason")
    if verdict not in ("pass", "fail") or not isinstance(reason, str):
        raise JudgeGarbage(f'expected {{"verdict": "pass"|"fail", "reason": "…"}}, got {answer!r}'[:300])
    return verdict, reason


def state_digest(state: SandboxState, budget: int = STATE_BUDGET) -> str:
    """The listable recorded state as plain text, oldest first, cut at `budget` characters."""
    parts = ["CALL TRANSCRIPT:"]
    parts += [f"[{i}] {turn.speaker}: {turn.text}" for i, turn in enumerate(state.voice_turns())] or [
        "(none)"
    ]
    parts.append("HL7 MESSAGES SENT:")
    parts += [record.message.replace("\r", "\n") for record in state.hl7_outbound()] or ["(none)"]
    parts.append("X12 RESPONSES RECEIVED:")
    parts += [record.response for record in state.x12_records()] or ["(none)"]
    parts.append("FILES:")
    parts += [f"{f.path} ({f.size} bytes)" for f in state.files()] or ["(none)"]
    text = "\n".join(parts)
    if len(text) > budget:
        text = text[:budget] + f"\n[… state cut at {budget} characters]"
    return text
