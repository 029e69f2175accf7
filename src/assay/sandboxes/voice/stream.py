"""The phone line as a WebSocket stream, modelled on Twilio Media Streams so agent frameworks
that speak it (Pipecat's Twilio serializer, LiveKit and Vapi bridges) connect with little glue.

`voice/calls/stream?to=<number>` dials the line; `voice/calls/{id}/stream` joins a call placed
with `POST voice/calls`, or answers a ringing inbound call (its caller speaks first). The run token goes in the `Authorization` header, as for every surface.
Frames are JSON text; audio is not carried, so `media` frames carry text:

line → agent
    `connected {protocol: "Call", version}`, then `start {streamSid, start: {streamSid, callSid,
    tracks, mediaFormat: {encoding: "text/plain"}}}`; each thing the line says is
    `media {streamSid, sequenceNumber, media: {track: "outbound", chunk, timestamp, speaker,
    text}}` (`timestamp` on the call's virtual clock, ms); each line event (`transfer`, `hold`,
    `refused`, `verified`, `reference`) is `mark {mark: {name: <kind>, text}}`; after every answer
    `mark {mark: {name: "line-done"}}` says the line stopped and waits for the agent; the end of
    the call is `stop {stop: {callSid, reason}}` and the socket closes (1000).
agent → line
    `media {media: {text, barge_in?}}` says something; `dtmf {dtmf: {digit}}` (or `digits`) keys in
    band — unlike Twilio's streams, which cannot carry DTMF from the app's side; `stop` hangs up;
    `mark` is acknowledged by nothing (a text agent has nothing to play).

A frame the line cannot use gets `error {error: {code, message}}` and the stream stays open.
Every action goes through the HTTP API's path (`calls.act`): the same transcript, the same
events, the same checks of the task run, made again before each frame (its deadline passing
mid-stream ends the call: `stop` with the reason, close 1008).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.surface import SandboxHandle, SurfaceTarget
from assay.sandboxes.voice.calls import act, place_call, run_action
from assay.sandboxes.voice.sim import restyler
from assay.sandboxes.voice.tables import VoiceCallRow
from assay.store import DomainError

__all__ = ["add_stream_routes"]

_MAX_FRAME = 16_384


def add_stream_routes(router: APIRouter, target: SurfaceTarget) -> None:
    async def resolve(websocket: WebSocket) -> SandboxHandle:
        run = {k: v for k, v in websocket.path_params.items() if k in ("task_run_id", "benchmark_run_id")}
        found = target(websocket, **run, authorization=websocket.headers.get("authorization"))
        return await found if inspect.isawaitable(found) else found  # type: ignore[no-any-return]

    @router.websocket("/calls/stream")
    async def dial_stream(websocket: WebSocket) -> None:
        await _serve(websocket, resolve, None)

    @router.websocket("/calls/{call_id}/stream")
    async def join_stream(websocket: WebSocket, call_id: str) -> None:
        await _serve(websocket, resolve, call_id)


async def _serve(websocket: WebSocket, resolve: Any, call_id: str | None) -> None:
    await websocket.accept()
    try:
        handle: SandboxHandle = await resolve(websocket)
    except DomainError as exc:
        frame = {"event": "error", "error": {"code": type(exc).__name__, "message": exc.message}}
        await websocket.send_text(json.dumps(frame))
        await websocket.close(code=1008, reason=exc.message[:120])
        return
    stream = _Stream(websocket, handle)
    await stream.send("connected", {"protocol": "Call", "version": "1.0.0"})
    try:
        if call_id is None:
            to = websocket.query_params.get("to")
            answer = await stream.run("dial", lambda conn, restyle: place_call(
                conn, sandbox_id=handle.sandbox_id, playground_id=handle.playground_id,
                task_run_id=handle.task_run_id, credentials=handle.credentials, to=to, restyle=restyle,
            ), {"to": to})  # fmt: skip
            if answer is None:
                await websocket.close(code=1008, reason="the call could not be placed")
                return
            call_id = str(answer["call_id"])
        stream.call_id = call_id
        await stream.send("start", {"start": {
            "streamSid": stream.sid, "callSid": call_id, "tracks": ["inbound", "outbound"],
            "mediaFormat": {"encoding": "text/plain"},
        }})  # fmt: skip
        if stream.pending is None and await run_in_threadpool(_ringing, handle, call_id):
            # joining an inbound call that rings answers it: the caller speaks first
            await stream.run("answer", _acting(handle, call_id, "answer", "", False), {})
        if stream.pending is not None and await stream.play(stream.pending):
            return
        await stream.loop(resolve)
    except WebSocketDisconnect:
        return


class _Stream:
    def __init__(self, websocket: WebSocket, handle: SandboxHandle):
        self.websocket, self.handle = websocket, handle
        self.sid = "MZ" + handle.sandbox_id[-30:]
        self.call_id: str | None = None
        self.sequence = 0
        self.chunk = 0
        self.pending: dict[str, Any] | None = None

    async def send(self, event: str, body: dict[str, Any]) -> None:
        self.sequence += 1
        frame = {"event": event, "sequenceNumber": str(self.sequence), **body}
        if event not in ("connected",):
            frame["streamSid"] = self.sid
        await self.websocket.send_text(json.dumps(frame))

    async def error(self, code: str, message: str) -> None:
        await self.send("error", {"error": {"code": code, "message": message}})

    async def run(self, action: str, work: Any, body: dict[str, Any]) -> dict[str, Any] | None:
        """One action on the line through the HTTP API's write path; None after an error frame."""

        def transaction() -> dict[str, Any]:
            return run_action(self.handle.deployment.engine, work, restyler(self.handle.deployment))

        try:
            answer = await run_in_threadpool(transaction)
        except DomainError as exc:
            await self.error(
                type(exc).__name__, exc.message if not exc.details else f"{exc.message}: {exc.details}"
            )
            return None
        self.handle.record(
            "voice_call", method="WS", path=self.websocket.url.path, status=200,
            request=json.dumps({"action": action, **body}).encode(), response=json.dumps(answer).encode(),
            response_json=True,
        )  # fmt: skip
        if action in ("dial", "answer"):
            self.pending = answer
        return answer

    async def play(self, answer: dict[str, Any]) -> bool:
        """Send what the line said; True when the call has ended (the stream then closes)."""
        for turn in answer.get("said", []):
            if turn["kind"] == "speech":
                self.chunk += 1
                await self.send("media", {"media": {
                    "track": "outbound", "chunk": str(self.chunk), "timestamp": str(turn["start_ms"]),
                    "speaker": turn["speaker"], "text": turn["text"], "seq": turn["seq"],
                }})  # fmt: skip
            elif turn["kind"] != "hangup":
                await self.send(
                    "mark", {"mark": {"name": turn["kind"], "text": turn["text"], "seq": turn["seq"]}}
                )
        if answer.get("status") == "ended":
            await self.send("stop", {"stop": {"callSid": self.call_id, "reason": answer.get("end_reason")}})
            await self.websocket.close(code=1000)
            return True
        await self.send("mark", {"mark": {"name": "line-done"}})
        return False

    async def loop(self, resolve: Any) -> None:
        while True:
            raw = await self.websocket.receive_text()
            if len(raw) > _MAX_FRAME:
                await self.error("FRAME_TOO_LARGE", f"a frame holds at most {_MAX_FRAME} characters")
                continue
            try:
                frame = json.loads(raw)
            except (ValueError, RecursionError):
                await self.error("BAD_FRAME", "a frame is a JSON object with an event")
                continue
            event = frame.get("event") if isinstance(frame, dict) else None
            action, value, barge_in = _action(frame, event)
            if event == "mark":
                continue
            if action is None:
                await self.error("BAD_FRAME", value)
                continue
            try:
                self.handle = await resolve(self.websocket)  # the run may have ended since
            except DomainError as exc:
                await self.send("stop", {"stop": {"callSid": self.call_id, "reason": exc.message}})
                await self.websocket.close(code=1008, reason=exc.message[:120])
                return
            answer = await self.run(action, _acting(self.handle, str(self.call_id), action, value, barge_in), {
                "value": value
            })  # fmt: skip
            if answer is not None and await self.play(answer):
                return


def _ringing(handle: SandboxHandle, call_id: str) -> bool:
    with handle.deployment.read_engine.connect() as conn:
        status = conn.execute(
            select(VoiceCallRow.status).where(
                VoiceCallRow.id == call_id, VoiceCallRow.sandbox_id == handle.sandbox_id
            )
        ).scalar()
    return status == "ringing"


def _acting(handle: SandboxHandle, call_id: str, action: str, value: str, barge_in: bool) -> Any:
    def work(conn: Any, restyle: Any) -> dict[str, Any]:
        return act(
            conn, sandbox_id=handle.sandbox_id, playground_id=handle.playground_id,
            credentials=handle.credentials, call_id=call_id, action=action, value=value, barge_in=barge_in,
            restyle=restyle,
        )  # fmt: skip

    return work


def _action(frame: Any, event: Any) -> tuple[str | None, str, bool]:
    """(action, value, barge_in) of an agent frame, or (None, why) when it is not one."""
    if event == "stop":
        return "hangup", "", False
    if event == "media":
        media = frame.get("media")
        text = media.get("text") if isinstance(media, dict) else None
        barge_in = media.get("barge_in", False) if isinstance(media, dict) else False
        if not isinstance(text, str) or not text.strip() or len(text) > 4000:
            return None, "media.text must be a non-empty string of at most 4000 characters", False
        if not isinstance(barge_in, bool):
            return None, "media.barge_in must be true or false", False
        return "say", text, barge_in
    if event == "dtmf":
        dtmf = frame.get("dtmf")
        digits = (dtmf.get("digits") or dtmf.get("digit")) if isinstance(dtmf, dict) else None
        if (
            not isinstance(digits, str)
            or not 0 < len(digits) <= 64
            or any(c not in "0123456789*#" for c in digits)
        ):
            return None, "dtmf.digit (or dtmf.digits) must be 1-64 of 0-9, * and #", False
        return "dtmf", digits, False
    return None, f"unknown event {event!r}: send media, dtmf, mark or stop", False
