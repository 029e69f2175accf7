"""The portal REST surface (docs/sandboxes.md) as a FastAPI router factory.

The service mounts `portal_router(surface)` under `/v1/task-runs/{id}/portal` (and the benchmark
run's); `surface` is a dependency resolving the run token to a `PortalSurface` or refusing (409
once the task run ended). `?portal=<slug>` picks one of several portals (`actions.resolve_slug`).
Every request that reached the portal — refused ones included — is one `portal_request` event:
the route class turns a domain error into the app's own error response (the service's one
mapping), records, and answers. Lists and gets read on the read engine (no write turn on SQLite);
creates and patches write through the write gate (`actions`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.json_depth import MAX_JSON_DEPTH, nested_deeper_than
from assay.sandboxes.openapi import ANY_OBJECT, json_answer, listed
from assay.sandboxes.portal import actions
from assay.sandboxes.portal.access import PortalSurface
from assay.store import BadRequest, DomainError, Invalid, clamp_limit
from assay.store.json_values import storable_json_problem

__all__ = ["RESERVED_PARAMETERS", "portal_router"]

RESERVED_PARAMETERS = frozenset({"limit", "cursor", "portal"})
"""Query parameters that are not row filters."""


class _RecordedRoute(APIRoute):
    """Answers a `DomainError` through the app's handler, then records the event."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def recorded(request: Request) -> Response:
            try:
                response = await handler(request)
            except DomainError as exc:
                response = request.app.exception_handlers[DomainError](request, exc)
            surface: PortalSurface | None = getattr(request.state, "portal_surface", None)
            if surface is not None:
                path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                raw = await request.body()
                await run_in_threadpool(
                    surface.record, request.method, path, response.status_code, raw, bytes(response.body)
                )
            return response

        return recorded


def _json(raw: bytes) -> Any:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("request body is not valid JSON") from None
    if nested_deeper_than(value):
        raise Invalid({"body": [f"nested deeper than {MAX_JSON_DEPTH} levels"]})
    problem = storable_json_problem(value)
    if problem:
        where, reason = problem
        raise Invalid({where or "body": [reason]})
    return value


def _answer(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status)


def portal_router(surface: Callable[..., PortalSurface]) -> APIRouter:
    """The REST routes over the portal `surface` resolves (a FastAPI dependency)."""
    router = APIRouter(tags=["portal"], route_class=_RecordedRoute)
    Surface = Depends(surface)

    @router.get("/{resource}", responses=json_answer(listed(ANY_OBJECT, paged=True), "One page of rows"))
    def list_rows(resource: str, request: Request, portal: PortalSurface = Surface) -> JSONResponse:
        """Rows of `resource`, newest first; any other query parameter filters (`status=approved`,
        `patient.member_id=M1`)."""
        params = request.query_params
        filters = [(k, v) for k, v in params.multi_items() if k not in RESERVED_PARAMETERS]
        with portal.read_engine.connect() as conn:
            store = actions.open_store(conn, portal.playground_id)
            slug = actions.resolve_slug(store, params.get("portal"))
            page = actions.list_rows(
                conn, store, slug, resource, filters, limit=clamp_limit(params.get("limit")),
                cursor=params.get("cursor"),
            )  # fmt: skip
        return _answer(
            {"data": page.rows, "_meta": {"next": page.next, "prev": page.prev, "limit": page.limit}}
        )

    @router.post("/{resource}", status_code=201, responses=json_answer(ANY_OBJECT, "The stored row", 201))
    async def create_row(resource: str, request: Request, portal: PortalSurface = Surface) -> JSONResponse:
        """Store a row; 201 with it, key filled. A `prior_auth_requests` row is decided at once."""
        body = _json(await request.body())
        slug = request.query_params.get("portal")

        def work() -> dict[str, Any]:
            with portal.engine.begin() as conn:
                return actions.create_row(conn, portal.playground_id, slug, resource, body)

        return _answer(await run_in_threadpool(work), 201)

    @router.get("/{resource}/{key}", responses=json_answer(ANY_OBJECT, "The row"))
    def get_row(resource: str, key: str, request: Request, portal: PortalSurface = Surface) -> JSONResponse:
        with portal.read_engine.connect() as conn:
            store = actions.open_store(conn, portal.playground_id)
            slug = actions.resolve_slug(store, request.query_params.get("portal"))
            return _answer(actions.get_row(conn, store, slug, resource, key).row)

    @router.patch("/{resource}/{key}", responses=json_answer(ANY_OBJECT, "The row as merged"))
    async def patch_row(
        resource: str, key: str, request: Request, portal: PortalSurface = Surface
    ) -> JSONResponse:
        """Merge top-level fields (`null` clears); the key cannot change."""
        body = _json(await request.body())
        slug = request.query_params.get("portal")

        def work() -> dict[str, Any]:
            with portal.engine.begin() as conn:
                return actions.patch_row(conn, portal.playground_id, slug, resource, key, body)

        return _answer(await run_in_threadpool(work))

    return router
