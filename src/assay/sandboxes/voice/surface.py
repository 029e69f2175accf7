"""The voice sandbox on the `Surface` seam (docs/sandboxes.md, docs/assertions.md, docs/snapshots.md).

Dataset type `voice`: `{"turns"?: [{speaker, text, start_ms?, end_ms?}], "line"?: {ivr?, rep?,
clock_start?}}` — seeded turns (an opening), and the phone line the agent calls
(`line/config.py`; the default payer IVR when no dataset gives one). The line writes both sides
of each call to the transcript (`source: line`); turns of calls made elsewhere are posted to
`voice/turns` (`source: reported`); `voice-transcript` and `voice-call` read the transcript.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Select, case, delete, exists, literal, select
from sqlalchemy.orm import Session

from assay.core.state import VoiceTurn
from assay.sandboxes.surface import (
    Deployment,
    LogSurface,
    ProvisionFailed,
    Purge,
    RunContext,
    ScenarioStep,
    StateView,
    SurfaceTarget,
)
from assay.sandboxes.viewer import ChatLine, PreviewEvent
from assay.sandboxes.voice.calls import LINE_KEY, end_calls, phone_number, ring
from assay.sandboxes.voice.line.config import line_problems, parse_line
from assay.sandboxes.voice.routes import voice_router
from assay.sandboxes.voice.sim import SIM_OPTIONS, close_sim, open_sim
from assay.sandboxes.voice.store import append_turns, last_turn, turn_problems, turns_until
from assay.sandboxes.voice.tables import VoiceCallRow, VoiceTurnRow
from assay.sandboxes.voice.tools import TOOLS
from assay.sandboxes.voice.viewer import chat_lines
from assay.snapshot import SnapshotWriter
from assay.store import utcnow
from assay.store.models import Playground, Sandbox, TaskRun

__all__ = ["VoiceSandbox", "VoiceView"]


_OPEN = ("active", "ringing")
_CALL_OPEN = -1
"""`capture_read`'s value while a call is open (a sequence number is never negative)."""
_NO_CALL_OPEN = "voice.no_call_open"
"""`Session.info` key: the playgrounds this unit of work captured, none of whose calls is open."""


class VoiceView(StateView):
    def __init__(self, turns: Sequence[VoiceTurn]):
        self.turns = list(turns)

    def voice_turns(self) -> Sequence[VoiceTurn]:
        return self.turns


def _add_turns(run: RunContext, sandbox: Sandbox, step: Mapping[str, Any]) -> None:
    """The scenario step `add_voice_turns {turns}` (docs/sandboxes.md)."""
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
    options = SIM_OPTIONS

    def open(self, deployment: Deployment) -> None:
        open_sim(deployment)

    def chat_lines(self, event: PreviewEvent) -> Sequence[ChatLine]:
        return chat_lines(event)

    def judged_events(self, evidence: Mapping[str, Any], events: Sequence[PreviewEvent]) -> Iterable[str]:
        return ()

    def close(self, deployment: Deployment) -> None:
        close_sim(deployment)

    def purge(self, gone: Purge) -> None:
        gone.session.execute(delete(VoiceTurnRow).where(VoiceTurnRow.sandbox_id.in_(gone.sandbox_ids)))
        gone.session.execute(delete(VoiceCallRow).where(VoiceCallRow.sandbox_id.in_(gone.sandbox_ids)))

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        if not isinstance(data, dict):
            return {"data": ["must be an object {turns?, line?}"]}
        errors: dict[str, list[str]] = {}
        for key in sorted(set(data) - {"turns", "line"}):
            errors[f"data.{key}"] = ["unknown key"]
        turns = data.get("turns")
        if "line" in data:
            errors.update(line_problems(data["line"], "data.line."))
        if turns is None and "line" in data:
            return errors
        if not isinstance(turns, list):
            errors["data.turns"] = ["must be an array of turn objects {speaker, text, start_ms?, end_ms?}"]
            return errors
        return {**errors, **turn_problems(turns, "data.turns.")}

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        connection = run.session.connection()
        line = None
        for dataset in datasets:
            data = dataset.get("data") or {}
            append_turns(connection, sandbox.id, data.get("turns") or [], seeded=True)
            line = data.get("line", line)  # the task's dataset (last) wins over the environment's
        if line is not None:
            sandbox.credentials = {**(sandbox.credentials or {}), LINE_KEY: line}
            ring(connection, sandbox.id, parse_line(line))
        # Stored too (not only shown by `start`), so an agent working through tools alone reads it
        # from `task_read`'s facts.
        sandbox.credentials = {
            **(sandbox.credentials or {}),
            "phone_number": phone_number(sandbox.credentials or {}),
        }

    def credentials(self, sandbox: Sandbox, host: str, deployment: Deployment) -> dict[str, Any]:
        return {"voice": {"phone_number": phone_number(sandbox.credentials or {})}}

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any]:
        """The last turn's sequence number, or `_CALL_OPEN` while a call is open: one value, read
        with the other surfaces' (it was a read of its own on every `complete`)."""
        open_call = select(VoiceCallRow.id).where(
            VoiceCallRow.sandbox_id == sandbox_id, VoiceCallRow.status.in_(_OPEN)
        )
        return select(
            case((exists(open_call), literal(_CALL_OPEN)), else_=last_turn(sandbox_id).scalar_subquery())
        )

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        """Calls still open are hung up first, so the graded transcript ends with the hang-up.
        Then none is open, and none can open before the commit (the capture holds the sandbox
        rows' lock, `sandboxes/gate.py`): the teardown that follows need not look."""
        if read == _CALL_OPEN:
            end_calls(session.connection(), [sandbox_id], "the task run completed")
            read = session.execute(last_turn(sandbox_id)).scalar()
        session.info.setdefault(_NO_CALL_OPEN, set()).add(playground_id)
        return super().capture(session, sandbox_id, playground_id, deployment, read)

    def teardown(self, session: Session, playground_id: str, deployment: Deployment) -> None:
        """A call that outlives its task run (cancelled, past its deadline) is hung up."""
        if playground_id in session.info.get(_NO_CALL_OPEN, ()):
            return
        sandboxes = sorted(
            set(
                session.execute(
                    select(VoiceCallRow.sandbox_id)
                    .join(Sandbox, Sandbox.id == VoiceCallRow.sandbox_id)
                    .where(Sandbox.playground_id == playground_id, VoiceCallRow.status.in_(_OPEN))
                ).scalars()
            )
        )
        if not sandboxes:  # one read, no call open: every `complete` pays only this
            return
        deadline = session.execute(
            select(TaskRun.deadline_at)
            .join(Playground, Playground.task_run_id == TaskRun.id)
            .where(Playground.id == playground_id)
        ).scalar()
        past = deadline is not None and deadline <= utcnow()
        reason = "the task deadline passed" if past else "the task run ended"
        end_calls(session.connection(), sandboxes, reason)

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
