"""`POST x12/{270|276|278}` (docs/sandboxes.md): a raw X12 body in, the raw X12 reply out.

Every answer is `200` with `Content-Type: application/edi-x12`: a 271/277/278, or the protocol's
own refusal — a 999 for syntax errors, a TA1 for envelope errors (the HL7 surface answers its
ACK `AR` the same way). Only a body over `MAX_REQUEST_BYTES` is refused by HTTP (413
`PAYLOAD_TOO_LARGE`). The exchange is stored before the answer leaves, and logged as an
`x12_exchange` sandbox event after that committed; one that meets its task run ended is refused
with 409 (`sandboxes/gate.py`) and stores nothing.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.gate import SandboxClosed
from assay.sandboxes.openapi import raw_answer
from assay.sandboxes.surface import SandboxHandle, SurfaceTarget
from assay.sandboxes.x12.engine import ENDPOINTS
from assay.sandboxes.x12.store import exchange
from assay.store.errors import PayloadTooLarge

__all__ = ["MAX_REQUEST_BYTES", "MEDIA_TYPE", "x12_router"]

MEDIA_TYPE = "application/edi-x12"
MAX_REQUEST_BYTES = 1024 * 1024
"""Largest request (about 15,000 subscribers of a 270): it is answered inside the sandbox's lock."""


def x12_router(target: SurfaceTarget) -> APIRouter:
    router = APIRouter()

    def route(endpoint: str) -> None:
        # `= Depends(...)`: under postponed annotations FastAPI resolves annotation strings in the
        # module's globals, where the local `target` is not.
        async def post(request: Request, handle: SandboxHandle = Depends(target)) -> Response:
            body = await request.body()
            if len(body) > MAX_REQUEST_BYTES:
                await run_in_threadpool(_refuse, handle, endpoint, body)
            return await run_in_threadpool(_answer, handle, endpoint, body)

        router.add_api_route(
            f"/{endpoint}",
            post,
            methods=["POST"],
            summary=f"Send a {endpoint}; get the {ENDPOINTS[endpoint]} (or a 999/TA1)",
            response_class=Response,
            responses=raw_answer(
                MEDIA_TYPE, f"The {ENDPOINTS[endpoint]}, or a 999/TA1 for a request it cannot read"
            ),
        )

    for endpoint in ENDPOINTS:
        route(endpoint)
    return router


def _answer(handle: SandboxHandle, endpoint: str, body: bytes) -> Response:
    """Blocking work (the exchange's transaction, then its event), off the event loop."""
    try:
        done = exchange(
            handle.deployment.engine,
            read_engine=handle.deployment.read_engine,
            org_id=handle.org_id,
            sandbox_id=handle.sandbox_id,
            endpoint=endpoint,
            body=body,
        )
    except SandboxClosed as closed:  # 409 in the API's envelope, logged like every request
        handle.record("x12_exchange", method="POST", path=f"x12/{endpoint}", status=409, request=body)
        raise closed
    answer = done.reply.text.encode("utf-8")
    handle.record(
        "x12_exchange", method="POST", path=f"x12/{endpoint}", status=200, request=body, response=answer
    )
    return Response(answer, media_type=MEDIA_TYPE, headers={"X-Assay-X12-Response": done.reply.kind})


def _refuse(handle: SandboxHandle, endpoint: str, body: bytes) -> None:
    """413 in the API's envelope (logged as an event first, like every request to a surface)."""
    message = f"an X12 request is at most {MAX_REQUEST_BYTES} bytes; this one is {len(body)}"
    handle.record("x12_exchange", method="POST", path=f"x12/{endpoint}", status=413, request=body)
    raise PayloadTooLarge(message)
