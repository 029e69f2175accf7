"""The voice sandbox on the `Surface` seam (SPEC §2, §3.6, §5.2, §5.3, §6).

Dataset type `voice` seeds the opening of the call (an IVR greeting): `{"turns": [{speaker, text,
start_ms?, end_ms?}]}`, speaker `agent`, `caller` or `ivr`. The agent posts its turns (and, in a
scripted call, the caller's) to `voice/turns`; `voice-transcript` reads the whole transcript.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Select
from sqlalchemy.orm import Session

from assay.core.state import VoiceTurn
from assay.sandboxes.surface import (
    LogSurface,
    ProvisionFailed,
    RunContext,
    ScenarioStep,
    StateView,
    SurfaceTarget,
)
from assay.sandboxes.voice.routes import voice_router
from assay.sandboxes.voice.store import append_turns, last_turn, turn_problems, turns_until
from assay.sandboxes.voice.tools import TOOLS
from assay.snapshot import SnapshotWriter
from assay.store.models import Sandbox

__all__ = ["VoiceSandbox", "VoiceView"]


class VoiceView(StateView):
    def __init__(self, turns: Sequence[VoiceTurn]):
        self.turns = list(turns)

    def voice_turns(self) -> Sequence[VoiceTurn]:
        return self.turns


def _add_turns(run: RunContext, sandbox: Sandbox, step: Mapping[str, Any]) -> None:
    """SPEC §5.3 `add_voice_turns {turns}`."""
    turns = step.get("turns")
    if not isinstance(turns, list):
        raise ProvisionFailed("scenario step add_voice_turns: turns must be an array of turn objects")
    errors = turn_problems(turns, "turns.")
    if errors:
        key, messages = next(iter(errors.items()))
        raise ProvisionFailed(f"scenario step add_voice_turns: {key} {messages[0]}")
    append_turns(run.session.connection(), sandbox.id, turns, seeded=True)


class VoiceSandbox(LogSurface):
    tools = TOOLS
    name = "voice"
    dataset_type = "voice"
    state_fields = frozenset({"voice_turns"})
    scenario_steps: Mapping[str, ScenarioStep] = {"add_voice_turns": _add_turns}

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        turns = data.get("turns") if isinstance(data, dict) else None
        if not isinstance(turns, list):
            return {"data.turns": ["must be an array of turn objects {speaker, text, start_ms?, end_ms?}"]}
        return turn_problems(turns, "data.turns.")

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        connection = run.session.connection()
        for dataset in datasets:
            append_turns(connection, sandbox.id, (dataset.get("data") or {}).get("turns") or [], seeded=True)

    def router(self, target: SurfaceTarget) -> APIRouter:
        return voice_router(target)

    def last_seq(self, sandbox_id: str) -> Select[Any]:
        return last_turn(sandbox_id)

    def read(self, pointer: Any, session: Session | None) -> VoiceView:
        if session is None or not isinstance(pointer, dict):
            return VoiceView(())
        return VoiceView(turns_until(session, str(pointer["sandbox_id"]), int(pointer["seq"])))

    def snapshot(self, view: StateView, writer: SnapshotWriter) -> None:
        if isinstance(view, VoiceView):
            for turn in view.turns:
                writer.add_voice_turn(turn)
