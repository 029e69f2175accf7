"""The voice surface over HTTP (docs/sandboxes.md).

The phone line: `POST voice/calls {to}` dials it (201: the call id and the line's first words);
`POST voice/calls/{id}/say {text}`, `…/dtmf {digits}` and `…/hangup` act on the call, each
answering with what the line said next; `GET voice/calls` and `GET voice/calls/{id}` read them.
Each action is one `voice_call` event.

The ingest API for calls made elsewhere: `POST voice/turns` (a turn or an array → 201, each
`source: reported`; the line's speakers `ivr` and `rep` are refused, 422), `GET voice/turns`
(the whole transcript, oldest first). Each stored turn is one `voice_turn` event, and so is
each refused POST (its status and error body; no turn stored). A write that meets its task run
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
from assay.sandboxes.voice.calls import acting, call_with_turns, calls_of, dialling, run_action
from assay.sandboxes.voice.sim import restyler
from assay.sandboxes.voice.store import LINE_SPEAKERS, append_turns, transcript, turn_problems
from assay.sandboxes.voice.stream import add_stream_routes
from assay.store import BadRequest, DomainError, Invalid, NotFound
from assay.store.json_values import storable_json_problem

__all__ = ["MAX_TURNS", "voice_router"]

MAX_TURNS = 1000
"""Turns in one POST."""
MAX_SAY = 4000
"""Characters in one `say` (a minute of speech is ~1,000)."""
MAX_DIGITS = 64


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
    for i, turn in enumerate(turns):
        if isinstance(turn, dict) and turn.get("speaker") in LINE_SPEAKERS:
            errors.setdefault(f"{i}.speaker", []).append(
                f"{turn['speaker']} is the phone line's speaker: only the line writes its turns "
                "(place a call with POST voice/calls)"
            )
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
        "source": {"type": "string", "enum": ["line", "reported", "seeded"]},
        "call_id": {"type": "string"},
        "kind": {"type": "string"},
    },
}


_CALL = {
    "type": "object",
    "required": ["call_id", "status"],
    "properties": {
        "call_id": {"type": "string"},
        "status": {"type": "string", "enum": ["ringing", "active", "ended"]},
        "said": listed(_TURN),
        "clock_ms": {"type": "integer"},
        "end_reason": {"type": "string"},
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

    def _body(raw: bytes, key: str) -> Any:
        try:
            value = json.loads(raw) if raw else {}
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise BadRequest("the body is not valid JSON") from None
        if not isinstance(value, dict):
            raise Invalid({"body": [f"must be an object {{{key}}}"]})
        return value

    def _call_event(handle: SandboxHandle, request: Request, status: int, body: Any, answer: Any) -> None:
        handle.record(
            "voice_call",
            method="POST",
            path=request.url.path,
            status=status,
            request=json.dumps(body).encode(),
            response=json.dumps(answer).encode(),
            response_json=True,
        )

    @router.post(
        "/calls", status_code=201, responses=json_answer(_CALL, "The call and the line's first words", 201)
    )
    async def post_call(request: Request, handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """Dial the line (`to`: `credentials.voice.phone_number`); 201 with `call_id` and `said`."""
        body = _body(await request.body(), "to")

        dial = dialling(
            sandbox_id=handle.sandbox_id, playground_id=handle.playground_id,
            task_run_id=handle.task_run_id, credentials=handle.credentials, to=body.get("to"),
        )  # fmt: skip

        def work() -> dict[str, Any]:
            return run_action(handle.deployment.engine, dial, restyler(handle.deployment))

        answer = await run_in_threadpool(work)
        _call_event(handle, request, 201, body, answer)
        return JSONResponse(answer, status_code=201)

    async def _act(
        request: Request, handle: SandboxHandle, call_id: str, action: str, key: str
    ) -> JSONResponse:
        body = _body(await request.body(), key) if key else {}
        value = body.get(key, "") if key else ""
        if action == "say" and (not isinstance(value, str) or not value.strip() or len(value) > MAX_SAY):
            raise Invalid({"text": [f"must be a non-empty string of at most {MAX_SAY} characters"]})
        if action == "dtmf" and (
            not isinstance(value, str) or not value or len(value) > MAX_DIGITS
            or any(c not in "0123456789*#" for c in value)
        ):  # fmt: skip
            raise Invalid({"digits": [f"must be 1-{MAX_DIGITS} of 0-9, * and #"]})
        barge_in = body.get("barge_in", False)
        if not isinstance(barge_in, bool):
            raise Invalid({"barge_in": ["must be true or false"]})

        acted = acting(
            sandbox_id=handle.sandbox_id, playground_id=handle.playground_id,
            credentials=handle.credentials, call_id=call_id, action=action, value=value,
            barge_in=barge_in,
        )  # fmt: skip

        def work() -> dict[str, Any]:
            return run_action(handle.deployment.engine, acted, restyler(handle.deployment))

        answer = await run_in_threadpool(work)
        _call_event(handle, request, 200, body, answer)
        return JSONResponse(answer)

    @router.post("/calls/{call_id}/say", responses=json_answer(_CALL, "What the line said next"))
    async def post_say(
        call_id: str, request: Request, handle: SandboxHandle = Depends(target)
    ) -> JSONResponse:
        """Say `text` on the call (`barge_in: true`: started while the line was still speaking);
        200 with what the line said next (`said`)."""
        return await _act(request, handle, call_id, "say", "text")

    @router.post("/calls/{call_id}/dtmf", responses=json_answer(_CALL, "What the line said next"))
    async def post_dtmf(
        call_id: str, request: Request, handle: SandboxHandle = Depends(target)
    ) -> JSONResponse:
        """Press keys (`digits`: 0-9, *, #); 200 with what the line said next."""
        return await _act(request, handle, call_id, "dtmf", "digits")

    @router.post("/calls/{call_id}/answer", responses=json_answer(_CALL, "The caller's first words"))
    async def post_answer(
        call_id: str, request: Request, handle: SandboxHandle = Depends(target)
    ) -> JSONResponse:
        """Answer a ringing inbound call; 200 with the caller's first words (the caller speaks first)."""
        return await _act(request, handle, call_id, "answer", "")

    @router.post("/calls/{call_id}/hangup", responses=json_answer(_CALL, "The ended call"))
    async def post_hangup(
        call_id: str, request: Request, handle: SandboxHandle = Depends(target)
    ) -> JSONResponse:
        """Hang up; 200 with the call `ended`."""
        return await _act(request, handle, call_id, "hangup", "")

    @router.get("/calls", responses=json_answer(listed(_CALL), "The task run's calls"))
    def get_calls(handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """Every call placed on the line in this task run, oldest first."""
        with handle.deployment.read_engine.connect() as conn:
            return JSONResponse({"data": calls_of(conn, handle.sandbox_id)})

    @router.get("/calls/{call_id}", responses=json_answer(_CALL, "The call and its transcript"))
    def get_call(call_id: str, handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """One call and its turns (`turns`), oldest first."""
        with handle.deployment.read_engine.connect() as conn:
            found = call_with_turns(conn, handle.sandbox_id, call_id)
        if found is None:
            raise NotFound.of("call", call_id)
        return JSONResponse(found)

    add_stream_routes(router, target)

    @router.get("/turns", responses=json_answer(listed(_TURN), "The transcript, oldest first"))
    def get_turns(handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """The transcript so far: `{data: [{seq, speaker, text, start_ms?, end_ms?, seeded}]}`."""
        with handle.deployment.read_engine.connect() as conn:
            return JSONResponse({"data": transcript(conn, handle.sandbox_id)})

    return router
