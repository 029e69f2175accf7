"""`voice-call`: what happened on a call the phone line recorded, field by field.

Only turns the sandbox's line wrote (`source: line`) count, grouped by call; a criterion holds
when one call meets every field it gives, and the best call (most fields met, then the first) is
the one reported. The figures come from the recorded turns and their virtual-clock times:

- `reached`: `rep` when a representative spoke, else `ivr`;
- `verified`: a `verified` event; `verified_before_asking`: verified and no `refused` event;
- `dtmf_path`: the agent's key entries, in order, begin with the listed ones;
- `caller_outcome`: how the simulated caller of an inbound call ended it (its `signal` event);
  a `fault` event (the simulator failed) makes the criterion `error`, not a failure;
- `reference_captured_in`: the reference number the line gave (its `reference` event) appears in
  a portal row of the resource, a FHIR resource of the type, or an uploaded file;
- latency: each agent turn that answers the line starts this long after the line's last words
  ended (negative: it talked over the line); `first_word` is the first of them, p50 the lower
  median; `talk_over` counts the negative ones; `duration` runs from the first turn's start to
  the last turn's end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction
from statistics import median_low
from typing import Any

from assay.checks._context import CheckContext
from assay.core.assertions import VoiceCall
from assay.core.assertions.voice import CALL_FIELDS, ReferenceTarget
from assay.core.results import CriterionResult
from assay.core.state import SandboxState, VoiceTurn

__all__ = ["call_figures", "check"]

_LINE = ("ivr", "rep")


def check(assertion: VoiceCall, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge every call; the best one decides. Never raises for bad data."""
    calls: dict[str, list[tuple[int, VoiceTurn]]] = {}
    for index, turn in enumerate(state.voice_turns()):
        if turn.source == "line" and turn.call_id:
            calls.setdefault(turn.call_id, []).append((index, turn))
    if not calls:
        return CriterionResult.failed("No call was placed on the phone line", {"calls": []})
    for call_id, turns in calls.items():  # the simulator's failure is not the agent's
        fault = next((turn for _, turn in turns if turn.kind == "fault"), None)
        if fault is not None:
            return CriterionResult.error(f"the simulated caller failed on call {call_id}: {fault.text}")
    judged = [_judge(assertion, state, call_id, turns) for call_id, turns in calls.items()]
    best = max(judged, key=lambda entry: entry["met"])
    wanted = best["asked"]
    score = Fraction(best["met"], wanted)
    failing = [name for name, field in best["fields"].items() if not field["passed"]]
    details = (
        f"Call {best['call_id']} met all {wanted} call checks"
        if not failing
        else f"Call {best['call_id']} met {best['met']} of {wanted} call checks; not: {', '.join(failing)}"
    )
    return CriterionResult(score, details, {"call_id": best["call_id"], "calls": judged})


def call_figures(turns: Sequence[VoiceTurn]) -> dict[str, Any]:
    """The figures one call's turns give (see the module's docstring)."""
    latencies: list[int] = []
    line_end: int | None = None
    for turn in turns:
        if turn.speaker in _LINE and turn.kind == "speech" and turn.end_ms is not None:
            line_end = turn.end_ms
        elif (
            turn.speaker == "agent"
            and turn.kind in ("speech", "dtmf")
            and None not in (turn.start_ms, line_end)
        ):
            latencies.append(int(turn.start_ms or 0) - int(line_end or 0))
            line_end = None  # one response per thing the line said
    starts = [t.start_ms for t in turns if t.start_ms is not None]
    ends = [t.end_ms for t in turns if t.end_ms is not None]
    verified_at = next((i for i, t in enumerate(turns) if t.kind == "verified"), None)
    return {
        "reached": "rep" if any(t.speaker == "rep" and t.kind == "speech" for t in turns) else "ivr",
        "verified": verified_at is not None,
        "refusals": sum(t.kind == "refused" for t in turns),
        "dtmf": [t.text for t in turns if t.speaker == "agent" and t.kind == "dtmf"],
        "reference_number": next((t.text for t in turns if t.kind == "reference"), None),
        "caller_outcome": next((t.text for t in turns if t.kind == "signal"), None),
        "duration_ms": (max(ends) - min(starts)) if starts and ends else 0,
        "first_word_ms": latencies[0] if latencies else None,
        "latency_p50_ms": median_low(latencies) if latencies else None,
        "latency_max_ms": max(latencies) if latencies else None,
        "talk_over": sum(value < 0 for value in latencies),
        "latencies_ms": latencies,
    }


def _judge(
    assertion: VoiceCall, state: SandboxState, call_id: str, turns: list[tuple[int, VoiceTurn]]
) -> dict[str, Any]:
    figures = call_figures([turn for _, turn in turns])
    fields: dict[str, dict[str, Any]] = {}

    def field(name: str, passed: bool, actual: Any) -> None:
        fields[name] = {"passed": passed, "expected": getattr(assertion, name), "actual": actual}

    if assertion.reached is not None:
        order = ("ivr", "rep")
        field(
            "reached", order.index(figures["reached"]) >= order.index(assertion.reached), figures["reached"]
        )
    if assertion.verified is not None:
        field("verified", figures["verified"] == assertion.verified, figures["verified"])
    if assertion.verified_before_asking is not None:
        clean = figures["verified"] and figures["refusals"] == 0
        field("verified_before_asking", clean == assertion.verified_before_asking, {
            "verified": figures["verified"], "refusals": figures["refusals"]
        })  # fmt: skip
    if assertion.dtmf_path is not None:
        path = assertion.dtmf_path
        field("dtmf_path", figures["dtmf"][: len(path)] == path, figures["dtmf"])
    if assertion.reference_captured_in is not None:
        number = figures["reference_number"]
        where = _captured(state, number, assertion.reference_captured_in) if number else None
        field("reference_captured_in", where is not None, {"reference_number": number, "found_in": where})
    if assertion.caller_outcome is not None:
        field(
            "caller_outcome", figures["caller_outcome"] == assertion.caller_outcome, figures["caller_outcome"]
        )
    for name, figure in (
        ("max_duration_ms", "duration_ms"),
        ("max_first_word_ms", "first_word_ms"),
        ("max_latency_p50_ms", "latency_p50_ms"),
        ("max_latency_ms", "latency_max_ms"),
        ("max_talk_over", "talk_over"),
    ):
        bound = getattr(assertion, name)
        if bound is not None:
            value = figures[figure]
            field(name, value is not None and value <= bound, value)
    asked = sum(getattr(assertion, name) is not None for name in CALL_FIELDS)
    return {
        "call_id": call_id,
        "turns": [index for index, _ in turns],
        "figures": {k: v for k, v in figures.items() if k != "latencies_ms"},
        "fields": fields,
        "met": sum(f["passed"] for f in fields.values()),
        "asked": asked,
    }


def _captured(state: SandboxState, number: str, targets: Sequence[ReferenceTarget]) -> dict[str, Any] | None:
    """The first place of the final state holding the number, or None."""
    for target in targets:
        if target.surface == "portal" and target.resource:
            for row in state.portal_rows(target.resource):
                if number in json.dumps(row.row, ensure_ascii=False):
                    return {"surface": "portal", "resource": target.resource, "row": row.seq}
        elif target.surface == "fhir" and target.resource:
            for resource in state.fhir_search(target.resource, {}):
                if number in json.dumps(resource, ensure_ascii=False):
                    return {"surface": "fhir", "resource": f"{target.resource}/{resource.get('id')}"}
        elif target.surface == "files":
            for file in state.files():
                try:
                    content = state.read_file(file.path)
                except (OSError, KeyError, ValueError):
                    continue
                if number.encode() in content:
                    return {"surface": "files", "path": file.path}
    return None
