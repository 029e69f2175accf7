"""`notes`: an agent posts notes, a `notes` dataset seeds some.

Its state is its notes, kept in the sandbox event log (one `note` event each), so it needs no table
of its own. A note is numbered by its place among the sandbox's notes; the snapshot holds
`notes/<n>.txt`, and `<n>.txt` is its change key for `no-unexpected-changes`. Its one setting,
`ASSAY_NOTES_MAX_LENGTH`, caps a note's length. A benchmark package may hold a notes dataset bare,
as `datasets/<name>.notes.json`. It opts into `Viewer`: the task-run page draws a note the agent
wrote as a chat line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.events import write_event
from assay.sandboxes.gate import admit
from assay.sandboxes.surface import BaseSurface, RunContext, SandboxHandle, StateView, SurfaceTarget
from assay.sandboxes.viewer import ChatLine, PreviewEvent, preview_json
from assay.snapshot import SnapshotWriter
from assay.store.errors import Invalid
from assay.store.models import Sandbox, SandboxEvent

NOTE = "note"


class NotesView(StateView):
    def __init__(self, notes: Sequence[tuple[str, bool]] = (), *, captured: bool = False):
        self.notes = list(notes)
        """(text, seeded) in the order they were written."""
        self.captured = captured

    def baseline(self) -> dict[str, str] | None:
        seeded = {key: digest for key, digest, was_seeded in self._keyed() if was_seeded}
        return seeded if self.captured else None

    def digests(self) -> dict[str, str]:
        return {key: digest for key, digest, _ in self._keyed()}

    def _keyed(self) -> list[tuple[str, str, bool]]:
        return [
            (f"{n}.txt", hashlib.sha256(text.encode()).hexdigest(), seeded)
            for n, (text, seeded) in enumerate(self.notes, 1)
        ]


def _note_body(text: str) -> bytes:
    return json.dumps({"text": text}).encode()


class NotesSandbox(BaseSurface):
    name = "notes"
    dataset_type = "notes"
    dataset_files = ".notes.json"  # a package's datasets/<name>.notes.json: {"notes": [...]} as is
    options = {"max_length": int}  # its settings section: ASSAY_NOTES_MAX_LENGTH

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        notes = data.get("notes") if isinstance(data, dict) else None
        if not isinstance(notes, list) or not all(isinstance(note, str) for note in notes):
            return {"data.notes": ["must be an array of strings"]}
        return {}

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        run.session.flush()  # the sandbox row, which the events reference
        for dataset in datasets:
            for text in dataset["data"]["notes"]:
                write_event(
                    run.session.connection(), org_id=run.org_id, sandbox_id=sandbox.id, type=NOTE,
                    method=None, path=None, status=None, request=_note_body(text),
                )  # fmt: skip

    def chat_lines(self, event: PreviewEvent) -> Sequence[ChatLine]:
        body = preview_json(event.request)
        if event.type != NOTE or not isinstance(body, dict):
            return ()
        return [ChatLine("note", "notes-agent", str(body.get("text", "")))]

    def judged_events(self, evidence: Mapping[str, Any], events: Sequence[PreviewEvent]) -> Iterable[str]:
        return ()

    def router(self, target: SurfaceTarget) -> APIRouter:
        router = APIRouter()

        async def write(request: Request, handle: SandboxHandle = Depends(target)) -> JSONResponse:
            body = await request.body()
            return JSONResponse({"note": await run_in_threadpool(_write, handle, body)}, status_code=201)

        router.add_api_route("/write", write, methods=["POST"], summary="Post a note {text}")
        return router

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any]:
        return select(func.max(SandboxEvent.seq)).where(SandboxEvent.sandbox_id == sandbox_id)

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Any, read: Any = None
    ) -> Any:
        return {"sandbox_id": sandbox_id, "seq": int(read or 0)}

    def read(self, pointer: Any, session: Session | None) -> NotesView:
        if session is None or not isinstance(pointer, dict):
            return NotesView()
        rows = session.execute(
            select(SandboxEvent.request, SandboxEvent.method)
            .where(
                SandboxEvent.sandbox_id == pointer["sandbox_id"],
                SandboxEvent.type == NOTE,
                SandboxEvent.seq <= pointer["seq"],
            )
            .order_by(SandboxEvent.seq)
        )
        return NotesView([(request["text"], method is None) for request, method in rows], captured=True)

    def snapshot(self, view: StateView, writer: SnapshotWriter) -> None:
        if isinstance(view, NotesView) and view.captured:
            for n, (text, _) in enumerate(view.notes, 1):
                writer.add_surface_file(self.name, f"{n}.txt", text.encode())
            writer.add_baseline(self.name, view.baseline() or {})


def _write(handle: SandboxHandle, body: bytes) -> int:
    """Store the note and its event in one transaction, admitted by the write gate (409 once the
    task run ended); the note's number."""
    text = json.loads(body)["text"]
    longest = int(handle.deployment.option(NotesSandbox.name, "max_length", 1000))
    if len(text) > longest:
        raise Invalid({"text": [f"a note is at most {longest} characters"]})
    with handle.deployment.engine.begin() as conn:
        admit(conn, handle.sandbox_id)
        write_event(
            conn, org_id=handle.org_id, sandbox_id=handle.sandbox_id, type=NOTE, method="POST",
            path=f"{NotesSandbox.name}/write", status=201, request=_note_body(text),
        )  # fmt: skip
        count = conn.execute(
            select(func.count()).where(
                SandboxEvent.sandbox_id == handle.sandbox_id, SandboxEvent.type == NOTE
            )
        ).scalar_one()
    return int(count)
