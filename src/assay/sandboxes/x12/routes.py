"""`POST x12/{270|276|278}` (SPEC §5.2): a raw X12 body in, the raw X12 reply out.

Every answer is `200` with `Content-Type: application/edi-x12`: a 271/277/278, or the protocol's
own refusal — a 999 for syntax errors, a TA1 for envelope errors (the HL7 surface answers its
ACK `AR` the same way). The exchange is stored before the answer leaves, and logged as an
`x12_exchange` sandbox event after that committed.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.surface import SandboxHandle, SurfaceTarget
from assay.sandboxes.x12.engine import ENDPOINTS
from assay.sandboxes.x12.store import exchange

__all__ = ["MEDIA_TYPE", "x12_router"]

MEDIA_TYPE = "application/edi-x12"


def x12_router(target: SurfaceTarget) -> APIRouter:
    router = APIRouter()

    def route(endpoint: str) -> None:
        # `= Depends(...)`: under postponed annotations FastAPI resolves annotation strings in the
        # module's globals, where the local `target` is not.
        async def post(request: Request, handle: SandboxHandle = Depends(target)) -> Response:
            body = await request.body()
            return await run_in_threadpool(_answer, handle, endpoint, body)

        router.add_api_route(
            f"/{endpoint}",
            post,
            methods=["POST"],
            summary=f"Send a {endpoint}; get the {ENDPOINTS[endpoint]} (or a 999/TA1)",
            response_class=Response,
        )

    for endpoint in ENDPOINTS:
        route(endpoint)
    return router


def _answer(handle: SandboxHandle, endpoint: str, body: bytes) -> Response:
    """Blocking work (the exchange's transaction, then its event), off the event loop."""
    done = exchange(
        handle.deployment.engine,
        org_id=handle.org_id,
        sandbox_id=handle.sandbox_id,
        endpoint=endpoint,
        body=body,
    )
    answer = done.reply.text.encode("utf-8")
    handle.record(
        "x12_exchange", method="POST", path=f"x12/{endpoint}", status=200, request=body, response=answer
    )
    return Response(answer, media_type=MEDIA_TYPE, headers={"X-Assay-X12-Response": done.reply.kind})
