"""The FHIR operations and the server's capabilities: `GET /metadata`, `$validate`,
`Observation/$lastn`, `Patient/$everything` and compartment search."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from assay.sandboxes.fhir import operations as fhir_operations
from assay.sandboxes.fhir.capability import capability_statement
from assay.sandboxes.fhir.openapi import answers
from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.routes.exchange import FhirSurface, json_body, run

__all__ = ["add_metadata", "add_operations"]


def add_metadata(router: APIRouter, resolved: Any) -> None:
    @router.get("/metadata", responses=answers("FhirCapabilityStatement"))
    async def metadata(request: Request, s: FhirSurface = resolved) -> Response:
        return await run(request, s, lambda _: FhirResult(200, capability_statement(s.base_url)), inline=True)


def add_operations(router: APIRouter, resolved: Any) -> None:
    @router.post(
        "/{resource_type}/$validate",
        responses=answers("OperationOutcome", description="The validation's issues"),
    )
    async def validate(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        return await run(
            request, s, lambda raw: fhir_operations.validate(resource_type, json_body(raw)), "json"
        )

    @router.get("/Observation/$lastn", responses=answers("FhirBundle"))
    async def lastn(request: Request, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request, s, lambda _: fhir_operations.lastn(s.fhir, s.store_id, s.base_url, pairs), inline=True
        )

    @router.get("/Patient/{patient_id}/$everything", responses=answers("FhirBundle"))
    async def everything(request: Request, patient_id: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request,
            s,
            lambda _: fhir_operations.everything(s.fhir, s.store_id, s.base_url, patient_id, pairs),
            inline=True,
        )

    @router.get("/{compartment}/{owner_id}/{resource_type}", responses=answers("FhirBundle"))
    async def compartment_search(
        request: Request, compartment: str, owner_id: str, resource_type: str, s: FhirSurface = resolved
    ) -> Response:
        pairs = list(request.query_params.multi_items())
        return await run(
            request,
            s,
            lambda _: fhir_operations.compartment_search(
                s.fhir, s.store_id, s.base_url, compartment, owner_id, resource_type, pairs
            ),
            inline=True,
        )
