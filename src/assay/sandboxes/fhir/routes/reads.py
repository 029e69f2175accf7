"""The FHIR read and search interactions: `GET /{type}`, `POST /{type}/_search`, `GET /{type}/{id}`,
and `serve_cached`, the same search and read answered from the worker's index without routing.

Reads of the embedded store whose index is known current are served on the event loop, with no
thread hand-off and no SQL (`store.CACHED_ONLY`), and fall back to the thread pool the moment they
would need either.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response

from assay.formats.fhir import is_resource_type
from assay.sandboxes.events import has_room
from assay.sandboxes.fhir import actions, searching
from assay.sandboxes.fhir.openapi import answers
from assay.sandboxes.fhir.preferences import parse_prefer
from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.routes.exchange import (
    FhirSurface,
    acceptable,
    event_path,
    handle,
    media_type_of,
    run,
)
from assay.sandboxes.fhir.store import CACHED_ONLY, NeedsDatabase
from assay.sandboxes.fhir.subsetting import parse_subset
from assay.sandboxes.surface import CatchUp

__all__ = ["add_reads", "serve_cached"]


def add_reads(router: APIRouter, resolved: Any) -> None:
    @router.get("/{resource_type}", responses=answers("FhirBundle"))
    async def search_get(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        lenient = parse_prefer(request.headers.get("prefer")).lenient
        return await run(
            request,
            s,
            lambda _: searching.search(
                s.fhir, s.store_id, s.base_url, resource_type, pairs, lenient=lenient, answers=s.fhir.answers
            ),
            inline=True,
        )

    @router.post("/{resource_type}/_search", responses=answers("FhirBundle"))
    async def search_post(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        lenient = parse_prefer(request.headers.get("prefer")).lenient

        def work(raw: bytes) -> FhirResult:
            form = parse_qsl(raw.decode("utf-8", errors="replace"), keep_blank_values=True)
            pairs = list(request.query_params.multi_items()) + form
            return searching.search(
                s.fhir, s.store_id, s.base_url, resource_type, pairs, lenient=lenient, answers=s.fhir.answers
            )

        return await run(request, s, work, "form")

    @router.get("/{resource_type}/{resource_id}", responses=answers("FhirResource"))
    async def read(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request,
            s,
            # parsed in the work, so a bad `_summary` is the 400 OperationOutcome (it was a 500)
            lambda _: actions.read(s.fhir, s.store_id, resource_type, resource_id, parse_subset(pairs)),
            inline=True,
        )


_READ_ID = re.compile(r"[A-Za-z0-9\-.]{1,64}")
"""An id `serve_cached` reads: FHIR's id syntax, so never `_history`, `_search` or `$lastn`, the
routes a two-segment path can also be."""


def serve_cached(request: Request, surface: FhirSurface, relative: str) -> Response | None:
    """A GET search (`/{type}`) or read (`/{type}/{id}`) of the embedded store answered from this
    worker's current index, with no SQL and no thread hand-off, as `search_get` and `read` answer
    it under `CACHED_ONLY`, and recorded the same way; None for any other request (the routes
    answer it), `CatchUp` when the answer would need SQL (the index is behind the store, or
    busy) — nothing is recorded then.

    It is how the agent path skips FastAPI's routing, dependency solving and middleware for the
    requests agents send most (`service/fast_path.py`)."""
    if surface.external is not None or not has_room(surface.fhir.engine):
        return None
    headers = request.headers
    if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers or not acceptable(request):
        return None  # a GET with a body, or a format refused with 406: the routes' way
    parts = relative.split("/")
    work: Callable[[], FhirResult]
    if len(parts) == 2 and is_resource_type(parts[1]):
        resource_type, pairs = parts[1], list(request.query_params.multi_items())
        lenient = parse_prefer(headers.get("prefer")).lenient

        def work() -> FhirResult:
            return searching.search(
                surface.fhir,
                surface.store_id,
                surface.base_url,
                resource_type,
                pairs,
                lenient=lenient,
                answers=surface.fhir.answers,
            )

    elif len(parts) == 3 and is_resource_type(parts[1]) and _READ_ID.fullmatch(parts[2]):
        resource_type, resource_id = parts[1], parts[2]
        pairs = list(request.query_params.multi_items())

        def work() -> FhirResult:
            subset = parse_subset(pairs)
            return actions.read(surface.fhir, surface.store_id, resource_type, resource_id, subset)

    else:
        return None
    token = CACHED_ONLY.set(True)
    try:
        return handle(surface, "GET", event_path(request), b"", work, media_type_of(request))
    except NeedsDatabase:
        fhir, store_id = surface.fhir, surface.store_id
        raise CatchUp(("fhir", id(fhir), store_id), lambda: fhir.catch_up(store_id)) from None
    finally:
        CACHED_ONLY.reset(token)
