"""The FHIR R4 REST surface as a FastAPI router factory (docs/sandboxes.md).

The service mounts `fhir_router(surface)` under `/v1/task-runs/{id}/fhir` and
`/v1/benchmark-runs/{id}/fhir`; `surface` is a FastAPI dependency that resolves the caller's run
token to a `FhirSurface` (which store, which base URL, where events go) or refuses (409 once the
task run ended). The interactions are grouped by kind: `reads` (read, search), `writes` (create,
update, patch, delete, batch and transaction), `history` (history, vread) and `operations`
(`$validate`, `$lastn`, `$everything`, compartment search, `metadata`); `exchange` runs each one
(body read on the event loop, store work in the thread pool or, for a read the index can answer,
on the event loop) and records every request, failed ones included, as one sandbox event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.routing import BaseRoute

from assay.sandboxes.fhir.openapi import FHIR_ERRORS
from assay.sandboxes.fhir.routes.exchange import (
    EVERY_METHOD,
    FHIR_JSON,
    MAX_BUNDLE_BYTES,
    MAX_RESOURCE_BYTES,
    FhirRoute,
    FhirSurface,
    SurfaceEvent,
    base_url_of,
    refuse,
    run,
    unrouted_answer,
)
from assay.sandboxes.fhir.routes.history import add_history
from assay.sandboxes.fhir.routes.operations import add_metadata, add_operations
from assay.sandboxes.fhir.routes.reads import add_reads, serve_cached
from assay.sandboxes.fhir.routes.writes import add_bundle, add_writes

__all__ = [
    "FHIR_JSON",
    "MAX_BUNDLE_BYTES",
    "MAX_RESOURCE_BYTES",
    "FhirSurface",
    "SurfaceEvent",
    "base_url_of",
    "fhir_router",
    "serve_cached",
]


def fhir_router(surface: Callable[..., Any]) -> APIRouter:
    """Routes of one FHIR base; `surface` is the dependency that yields its `FhirSurface`.

    The order of the groups is the order paths are matched in: `_history` and the operations'
    fixed segments (`$lastn`, `$everything`) before the `{resource_type}/{resource_id}` they would
    otherwise match as, and the catch-all last."""
    router = APIRouter(tags=["fhir"], route_class=FhirRoute, responses=FHIR_ERRORS)
    resolved = Depends(surface)
    interactions: list[BaseRoute] = []
    add_metadata(router, resolved)
    add_bundle(router, resolved)
    add_history(router, resolved)
    add_operations(router, resolved)
    add_reads(router, resolved)
    add_writes(router, resolved, interactions)
    interactions.extend(router.routes)

    @router.get("", include_in_schema=False)
    @router.get("/", include_in_schema=False)
    async def base_search(request: Request, s: FhirSurface = resolved) -> Response:
        """A GET on the base with a query: a paging link there (an external HAPI server pages every
        search with `next` links `[base]?_getpages=…`) or a system-level search, forwarded to an
        external server (each strategy keeps it to the playground). The embedded store serves
        neither, so there, and on any backend without a query, it is the 405 it always was
        (`Allow: POST`; `interactions` does not list this route)."""
        if s.external is None or not request.url.query:
            return await refuse(request, s, interactions)
        # `run` forwards the request; the work given is what the embedded store would answer.
        return await run(request, s, lambda _: unrouted_answer(request, interactions, s.base_url))

    @router.api_route("", methods=EVERY_METHOD, include_in_schema=False)
    @router.api_route("/{unrouted:path}", methods=EVERY_METHOD, include_in_schema=False)
    async def unrouted(request: Request, s: FhirSurface = resolved) -> Response:
        """Anything no route above takes; answered here (never forwarded to an external server)."""
        return await refuse(request, s, interactions)

    return router
