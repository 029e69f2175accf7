"""The HL7v2 surface over HTTP (docs/sandboxes.md): `GET hl7/inbox`, `POST hl7/outbound`.

`POST hl7/outbound` takes `{"payload": "<ER7>"}` (JSON) or the raw ER7 body (any other content
type) and answers 200 with the ACK (`x-application/hl7-v2+er7`), whatever its code: `AE` and
`AR` are the protocol's own refusals, not HTTP errors. Only a JSON body without a string
`payload` is a 422 (or 400 when it is not JSON), and a message that would be stored after its task
run stopped taking writes a 409 (`sandboxes/gate.py`). Each POST is an `hl7_outbound` event, each GET of
the inbox an `hl7_inbound` event (what the agent was delivered).

With `X-Assay-Route: mllp` (what the `hl7_send` tool sends) the message is also routed as the
MLLP listener routes it: one whose MSH-6.1 does not name this run's receiving facility is refused
with the listener's own `AR`, so a tool call is answered exactly as the same bytes over MLLP.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.gate import SandboxClosed
from assay.sandboxes.hl7.ack import inspect
from assay.sandboxes.hl7.store import accept, inbox, unroutable
from assay.sandboxes.openapi import json_answer, listed, raw_answer
from assay.sandboxes.surface import SandboxHandle, SurfaceTarget
from assay.store import BadRequest, Invalid

__all__ = ["HL7_MEDIA_TYPE", "MLLP_ROUTE_HEADER", "hl7_router"]

HL7_MEDIA_TYPE = "x-application/hl7-v2+er7"
MLLP_ROUTE_HEADER = "x-assay-route"


def _payload(body: bytes, content_type: str) -> bytes:
    if "json" not in content_type.lower():
        return body
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest(
            'the body is not valid JSON; send {"payload": "MSH|..."} or the raw message'
        ) from None
    payload = value.get("payload") if isinstance(value, dict) else None
    if not isinstance(payload, str):
        raise Invalid({"payload": ["required: the HL7v2 message as a string"]})
    return payload.encode("utf-8")


_INBOX = listed(
    {
        "type": "object",
        "required": ["id", "message", "received_at"],
        "properties": {
            "id": {"type": "string"},
            "message": {"type": "string"},
            "received_at": {"type": "string"},
        },
    }
)


def hl7_router(target: SurfaceTarget) -> APIRouter:
    router = APIRouter(tags=["hl7"])

    @router.get("/inbox", responses=json_answer(_INBOX, "The messages delivered to the agent, oldest first"))
    def get_inbox(request: Request, handle: SandboxHandle = Depends(target)) -> JSONResponse:
        """The messages delivered to the agent: `{data: [{id, message, received_at}]}`, oldest first."""
        messages = inbox(handle.deployment.read_engine, handle.sandbox_id)
        body = {"data": [{"id": m.id, "message": m.message, "received_at": m.received_at} for m in messages]}
        response = JSONResponse(body)
        handle.record(
            "hl7_inbound", method="GET", path=request.url.path, status=200, response=bytes(response.body)
        )
        return response

    @router.post(
        "/outbound",
        response_class=Response,
        responses=raw_answer(HL7_MEDIA_TYPE, "The ACK (MSA `AA`, `AE` or `AR`)"),
    )
    async def post_outbound(request: Request, handle: SandboxHandle = Depends(target)) -> Response:
        """Send one message (or a batch); the answer is its ACK (MSA `AA`, `AE` or `AR`)."""
        raw = await request.body()
        payload = _payload(raw, request.headers.get("content-type", ""))
        as_mllp = request.headers.get(MLLP_ROUTE_HEADER, "").lower() == "mllp"

        def work() -> bytes:
            inspection = inspect(payload)
            facility = inspection.facility
            try:
                if (
                    as_mllp
                    and facility != handle.credentials.get("receiving_facility")
                    and inspection.message is not None
                ):  # refused as the listener refuses it: nothing is stored, so no transaction
                    ack = unroutable(inspection, facility)
                else:
                    with handle.deployment.engine.begin() as conn:
                        ack = accept(conn, handle.sandbox_id, inspection)
            except SandboxClosed as closed:  # 409 in the API's envelope, logged like every request
                handle.record(
                    "hl7_outbound", method="POST", path=request.url.path, status=409, request=payload
                )
                raise closed
            text = ack.text.encode("utf-8")
            handle.record(
                "hl7_outbound",
                method="POST",
                path=request.url.path,
                status=200,
                request=payload,
                response=text,
            )
            return text

        return Response(await run_in_threadpool(work), media_type=HL7_MEDIA_TYPE)

    return router
