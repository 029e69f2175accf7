"""A standalone Assay FHIR R4 server with a store per tenant (`assay fhir-server`).

The embedded FHIR store and REST surface, served on their own: `PUT /stores/{id}` creates an empty
store (201; 200 when it exists), `/stores/{id}/fhir/...` is its FHIR base (the interactions
docs/sandboxes.md lists), `GET /stores/{id}` tells whether it exists, and `DELETE /stores/{id}` drops it with
every version it wrote (204; 404 when unknown). It is what `ASSAY_FHIR_ISOLATION=assay-store`
manages (a store per playground), and a plain FHIR server for anything else.

`ASSAY_FHIR_SERVER_TOKEN` (or `token=`), when set, is required as `Authorization: Bearer <token>`
on every route. Management errors use the envelope of docs/api.md; FHIR errors are OperationOutcomes (an
unknown store's FHIR base answers 404 with one).
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from assay.sandboxes.fhir import FHIR_JSON, EmbeddedFhir, FhirError, FhirSurface, SurfaceEvent, fhir_router
from assay.sandboxes.fhir.store import embedded_fhir
from assay.sandboxes.fhir.validation import LENIENT_ENV
from assay.service.errors import install_error_handlers
from assay.store import Database, Invalid, NotFound, Unauthorized

__all__ = ["STORE_ID", "StoreOut", "create_fhir_server"]

STORE_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")
"""Store ids: letters, digits, `_`, `.`, `-`; at most 40 characters (the `fhir_stores` key)."""


class StoreOut(BaseModel):
    id: str
    fhir_base: str
    """The store's FHIR base URL, absolute, without a trailing slash."""


def _authorized(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    token: str | None = request.app.state.token
    if token and not hmac.compare_digest((authorization or "").encode(), f"Bearer {token}".encode()):
        raise Unauthorized("this FHIR server needs Authorization: Bearer <ASSAY_FHIR_SERVER_TOKEN>")


def _fhir(request: Request) -> EmbeddedFhir:
    fhir: EmbeddedFhir = request.app.state.fhir
    return fhir


def _store(request: Request, store_id: str) -> StoreOut:
    if not STORE_ID.match(store_id):
        raise Invalid({"store_id": ["letters, digits, '_', '.' and '-' only, at most 40 characters"]})
    base = str(request.base_url).rstrip("/")
    return StoreOut(id=store_id, fhir_base=f"{base}/stores/{store_id}/fhir")


def _surface(request: Request, store_id: str) -> FhirSurface:
    fhir = _fhir(request)
    if not STORE_ID.match(store_id) or not fhir.exists(store_id):
        raise FhirError(404, f"no FHIR store {store_id}; create it with PUT /stores/{store_id}")
    base = _store(request, store_id).fhir_base
    return FhirSurface(fhir, store_id, base, request.app.state.record, trusts_seeding=True)


def _stores_router() -> APIRouter:
    router = APIRouter(tags=["stores"])

    @router.put("/stores/{store_id}", status_code=201)
    def put_store(request: Request, response: Response, store_id: str) -> StoreOut:
        """Create an empty store (201), or find the one that exists (200)."""
        store, fhir = _store(request, store_id), _fhir(request)
        if fhir.exists(store_id):
            response.status_code = 200
        else:
            fhir.provision(store_id)
        return store

    @router.get("/stores/{store_id}")
    def get_store(request: Request, store_id: str) -> StoreOut:
        store = _store(request, store_id)
        if not _fhir(request).exists(store_id):
            raise NotFound.of("store", store_id)
        return store

    @router.delete("/stores/{store_id}", status_code=204)
    def delete_store(request: Request, store_id: str) -> Response:
        """Drop the store and every version it wrote."""
        _store(request, store_id)
        if not _fhir(request).drop(store_id):
            raise NotFound.of("store", store_id)
        return Response(status_code=204)

    return router


def _outcome(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FhirError)
    return JSONResponse(exc.outcome(), status_code=exc.status, media_type=FHIR_JSON)


def create_fhir_server(
    database_url: str | None = None,
    *,
    fhir: EmbeddedFhir | None = None,
    token: str | None = None,
    record: Callable[[SurfaceEvent], None] | None = None,
    lenient: bool | None = None,
) -> FastAPI:
    """The app over `database_url` (migrated at start, disposed at shutdown), or over an existing
    `fhir` store; `token` defaults to `ASSAY_FHIR_SERVER_TOKEN` and `lenient` (writes checked
    structurally only) to `ASSAY_FHIR_LENIENT=1`, both read here, once; `record` sees every FHIR
    request."""
    if lenient is None:
        lenient = os.environ.get(LENIENT_ENV, "").strip().lower() in ("1", "true", "yes")
    if (database_url is None) == (fhir is None):
        raise ValueError("create_fhir_server takes a database_url or a fhir store, not both or neither")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if fhir is not None:
            app.state.fhir = fhir
            yield
            return
        database = Database(str(database_url))
        database.migrate()
        app.state.fhir = embedded_fhir(database.engine)
        app.state.fhir.lenient = lenient
        try:
            yield
        finally:
            database.dispose()

    app = FastAPI(title="Assay FHIR server", version="0.1.0", lifespan=lifespan)
    app.state.token = token if token is not None else os.environ.get("ASSAY_FHIR_SERVER_TOKEN") or None
    app.state.record = record
    install_error_handlers(app)
    app.add_exception_handler(FhirError, _outcome)
    auth = [Depends(_authorized)]
    app.include_router(_stores_router(), dependencies=auth)
    app.include_router(fhir_router(_surface), prefix="/stores/{store_id}/fhir", dependencies=auth)
    return app
