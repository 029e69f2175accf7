"""The FHIR history interactions: the whole store's, a type's and one resource's history, and
vread (one version of a resource)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from assay.sandboxes.fhir import actions
from assay.sandboxes.fhir.history import history as resource_history
from assay.sandboxes.fhir.history import store_history
from assay.sandboxes.fhir.openapi import answers
from assay.sandboxes.fhir.routes.exchange import FhirSurface, run

__all__ = ["add_history"]


def add_history(router: APIRouter, resolved: Any) -> None:
    @router.get("/_history", responses=answers("FhirBundle"))
    async def system_history(request: Request, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(request, s, lambda _: store_history(s.fhir, s.store_id, s.base_url, None, pairs))

    @router.get("/{resource_type}/_history", responses=answers("FhirBundle"))
    async def type_history(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request, s, lambda _: store_history(s.fhir, s.store_id, s.base_url, resource_type, pairs)
        )

    @router.get("/{resource_type}/{resource_id}/_history", responses=answers("FhirBundle"))
    async def history(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request,
            s,
            lambda _: resource_history(s.fhir, s.store_id, s.base_url, resource_type, resource_id, pairs),
        )

    @router.get("/{resource_type}/{resource_id}/_history/{version_id}", responses=answers("FhirResource"))
    async def vread(
        request: Request, resource_type: str, resource_id: str, version_id: str, s: FhirSurface = resolved
    ) -> Response:
        return await run(
            request, s, lambda _: actions.vread(s.fhir, s.store_id, resource_type, resource_id, version_id)
        )
