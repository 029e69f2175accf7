"""The voice surface over HTTP (SPEC §5.2): `POST voice/turns` (a turn or an array → 201), `GET
voice/turns` (the transcript, oldest first). Each stored turn is one `voice_turn` event, and so is
each refused POST (its status and error body; no turn stored); a POST that meets its task run
ended is refused with 409 (`sandboxes/gate.py`)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.gate import SandboxClosed
from assay.sandboxes.openapi import json_answer, listed
from assay.sandboxes.surface import SandboxHandle, SurfaceTarget
from assay.sandboxes.voice.store import append_turns, transcript, turn_problems
from assay.store import BadRequest, DomainError, Invalid
from assay.store.json_values import storable_json_problem

__all__ = ["MAX_TURNS", "voice_router"]

MAX_TURNS = 1000
"""Turns in one POST."""


def _turns(body: bytes) -> tuple[list[Any], bool]:
    """(the turns, whether one object was sent); 400 for non-JSON, 422 naming each bad key."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("the body is not valid JSON: send a turn object or an array of them") from None
    problem = storable_json_problem(value)
    if problem:  # NaN, a lone surrogate or a NUL: PostgreSQL refused what SQLite stored
        where, reason = problem
        raise Invalid({where or "body": [reason]})
    single = isinstance(value, dict)
    turns = [value] if single else value
    if not isinstance(turns, list):
        raise Invalid({"body": ["must be a turn object or an array of turn objects"]})
    if len(turns) > MAX_TURNS:
        raise Invalid({"body": [f"at most {MAX_TURNS} turns per request"]})
    errors = turn_problems(turns)
    if errors:
        if single:  # one object: keys are its own (`speaker`), not `0.speaker`
            errors = {key.partition(".")[2] or "body": value for key, value in errors.items()}
        raise Invalid(errors)
    return turns, single


_TURN = {
    "type": "object",
    "required": ["seq", "speaker", "text"],
    "properties": {
        "seq": {"type": "integer"},
        "speaker": {"type": "string"},
        "text": {"type": "string"},
        "start_ms": {"type": "integer"},
        "end_ms": {"type": "integer"},
        "seeded": {"type": "boolean"},
    },
}


def voice_router(target: SurfaceTarget) -> APIRouter:
    router = APIRouter(tags=["voice"])

    @router.post(
        "/turns",
        status_code=201,
        responses=json_answer(
            {"anyOf": [_TURN, listed(_TURN)]}, "The stored turn, or `{data}` for an array", 201
        ),
    )
    async def post_turns(request: Request, handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """Record one turn or an array of turns; 201 with the stored turns (`seq` numbered)."""
        raw = await request.body()
        try:
            turns, single = _turns(raw)
        except DomainError as exc:  # refused: the attempt is an event too, stored turns none
            refused = request.app.exception_handlers[DomainError](request, exc)
            await run_in_threadpool(
                handle.record,
                "voice_turn",
                method="POST",
                path=request.url.path,
                status=refused.status_code,
                request=raw,
                response=bytes(refused.body),
            )
            return refused

        def work() -> list[dict[str, Any]]:
            try:
                with handle.deployment.engine.begin() as conn:
                    stored = append_turns(conn, handle.sandbox_id, turns, seeded=False)
            except SandboxClosed as closed:  # 409 in the API's envelope, logged like every request
                handle.record("voice_turn", method="POST", path=request.url.path, status=409, request=raw)
                raise closed
            for row in stored:
                turn = {
                    key: row[key] for key in ("speaker", "text", "start_ms", "end_ms") if row[key] is not None
                }
                handle.record(
                    "voice_turn",
                    method="POST",
                    path=request.url.path,
                    status=201,
                    request=json.dumps(turn).encode(),
                    response=json.dumps({"seq": row["seq"]}).encode(),
                )
            return [
                {
                    "seq": row["seq"],
                    **{k: row[k] for k in ("speaker", "text", "start_ms", "end_ms") if row[k] is not None},
                }
                for row in stored
            ]

        stored = await run_in_threadpool(work)
        return JSONResponse(stored[0] if single else {"data": stored}, status_code=201)

    @router.get("/turns", responses=json_answer(listed(_TURN), "The transcript, oldest first"))
    def get_turns(handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """The transcript so far: `{data: [{seq, speaker, text, start_ms?, end_ms?, seeded}]}`."""
        with handle.deployment.engine.connect() as conn:
            return JSONResponse({"data": transcript(conn, handle.sandbox_id)})

    return router
