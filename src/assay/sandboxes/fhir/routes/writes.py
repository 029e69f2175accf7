"""The FHIR write interactions: create, update, patch and delete (each also conditional, by search
criteria), and the batch or transaction Bundle posted to the base."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.routing import BaseRoute

from assay.formats.fhir import is_resource_type
from assay.sandboxes.fhir import actions
from assay.sandboxes.fhir.bundles import post_bundle
from assay.sandboxes.fhir.external import SEED_HEADER
from assay.sandboxes.fhir.openapi import answers
from assay.sandboxes.fhir.preferences import parse_prefer, shape_write
from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.routes.exchange import (
    FhirSurface,
    if_match,
    json_body,
    patch_body,
    patch_type,
    refuse,
    run,
)
from assay.sandboxes.fhir.store import SEEDING

__all__ = ["add_bundle", "add_writes"]


def add_bundle(router: APIRouter, resolved: Any) -> None:
    @router.post("", responses=answers("FhirBundle", description="The batch or transaction response"))
    @router.post("/", responses=answers("FhirBundle", description="The batch or transaction response"))
    async def bundle(request: Request, s: FhirSurface = resolved) -> Response:
        seeding = s.trusts_seeding and request.headers.get(SEED_HEADER) == "1"

        def work(raw: bytes) -> FhirResult:
            token = SEEDING.set(seeding)
            try:
                return post_bundle(s.fhir, s.store_id, s.base_url, json_body(raw))
            finally:
                SEEDING.reset(token)

        return await run(request, s, work, "json")


def add_writes(router: APIRouter, resolved: Any, interactions: list[BaseRoute]) -> None:
    """`interactions`: every FHIR route of the router, filled in once all are added (a `PATCH` on a
    path that names no resource type is refused from them, 404 or 405)."""

    @router.put("/{resource_type}", responses=answers("FhirResource", 200, 201))
    async def conditional_update(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        condition = if_match(request)
        return await run(
            request,
            s,
            lambda raw: actions.conditional_update(
                s.fhir, s.store_id, s.base_url, resource_type, pairs, json_body(raw), condition
            ),
            "json",
        )

    @router.delete("/{resource_type}", responses=answers("FhirResource", 200, 204))
    async def conditional_delete(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request, s, lambda _: actions.conditional_delete(s.fhir, s.store_id, resource_type, pairs)
        )

    @router.post("/{resource_type}", responses=answers("FhirResource", 200, 201))
    async def create(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        condition = request.headers.get("if-none-exist")
        pairs = list(request.query_params.multi_items())
        prefer = parse_prefer(request.headers.get("prefer"))
        return await run(
            request,
            s,
            lambda raw: shape_write(
                actions.create(
                    s.fhir, s.store_id, s.base_url, resource_type, json_body(raw), condition, pairs
                ),
                prefer,
            ),
            "json",
        )

    @router.put("/{resource_type}/{resource_id}", responses=answers("FhirResource", 200, 201))
    async def update(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        condition = if_match(request)
        prefer = parse_prefer(request.headers.get("prefer"))
        return await run(
            request,
            s,
            lambda raw: shape_write(
                actions.update(
                    s.fhir, s.store_id, s.base_url, resource_type, resource_id, json_body(raw), condition
                ),
                prefer,
            ),
            "json",
        )

    @router.patch("/{resource_type}/{resource_id}", responses=answers("FhirResource"))
    async def patch(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        condition = if_match(request)
        content_type = patch_type(request)
        prefer = parse_prefer(request.headers.get("prefer"))

        def work(raw: bytes) -> FhirResult:
            body = patch_body(content_type, raw)
            return shape_write(
                actions.patch(s.fhir, s.store_id, resource_type, resource_id, body, condition), prefer
            )

        return await run(request, s, work)

    @router.patch("/{resource_type}", responses=answers("FhirResource"))
    async def conditional_patch(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        if not is_resource_type(resource_type):  # `PATCH /metadata`: the 405 it always was
            return await refuse(request, s, interactions)
        pairs = list(request.query_params.multi_items())
        condition = if_match(request)
        content_type = patch_type(request)
        prefer = parse_prefer(request.headers.get("prefer"))

        def work(raw: bytes) -> FhirResult:
            body = patch_body(content_type, raw)
            result = actions.conditional_patch(s.fhir, s.store_id, resource_type, pairs, body, condition)
            return shape_write(result, prefer)

        return await run(request, s, work)

    @router.delete("/{resource_type}/{resource_id}", responses=answers("FhirResource", 200, 204))
    async def delete(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        condition = if_match(request)
        return await run(
            request, s, lambda _: actions.delete(s.fhir, s.store_id, resource_type, resource_id, condition)
        )
