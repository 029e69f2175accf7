"""The FHIR R4 REST surface as a FastAPI router factory (SPEC §5.2).

The service mounts `fhir_router(surface)` under `/v1/task-runs/{id}/fhir` and
`/v1/benchmark-runs/{id}/fhir`; `surface` is a FastAPI dependency that resolves the caller's run
token to a `FhirSurface` (which store, which base URL, where events go) or refuses (409 once the
task run ended). Handlers read the body on the event loop and do the store work in the thread pool,
except reads of the embedded store whose index is known current (issue 9): those are served on
the event loop, with no thread hand-off and no SQL (`store.CACHED_ONLY`), and fall back to the
thread pool the moment they would need either. Every request, failed ones included, is handed to
`FhirSurface.record` as one sandbox event.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from assay.formats.fhir import is_resource_type
from assay.sandboxes.events import has_room
from assay.sandboxes.fhir import actions, operations, searching
from assay.sandboxes.fhir.actions import parse_json
from assay.sandboxes.fhir.bundles import post_bundle
from assay.sandboxes.fhir.capability import capability_statement
from assay.sandboxes.fhir.external import SEED_HEADER, FhirForwarder, ForwardedRequest
from assay.sandboxes.fhir.history import history as resource_history
from assay.sandboxes.fhir.history import store_history
from assay.sandboxes.fhir.openapi import FHIR_ERRORS, answers
from assay.sandboxes.fhir.outcomes import FhirError, operation_outcome
from assay.sandboxes.fhir.preferences import parse_prefer, shape_write
from assay.sandboxes.fhir.rendering import render_json
from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.store import CACHED_ONLY, SEEDING, EmbeddedFhir, NeedsDatabase
from assay.sandboxes.fhir.subsetting import parse_subset
from assay.sandboxes.surface import CatchUp
from assay.store.json_values import strict_json_problem

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

FHIR_JSON = "application/fhir+json"
_JSON_PATCH = "application/json-patch+json"
MAX_RESOURCE_BYTES = 5 * 1000 * 1000
MAX_BUNDLE_BYTES = 50 * 1000 * 1000


@dataclass(frozen=True, slots=True)
class SurfaceEvent:
    """One request to the surface, as the event log records it (SPEC §1.1 `fhir_request`)."""

    method: str
    path: str
    status: int
    request: bytes
    response: bytes
    response_json: bool = False
    """The response is strict JSON rendered here (`_render`), so the event log stores it as is."""


@dataclass(frozen=True, slots=True)
class FhirSurface:
    fhir: EmbeddedFhir
    store_id: str
    base_url: str
    """The FHIR base, absolute, without a trailing slash."""
    record: Callable[[SurfaceEvent], None] | None = None
    external: FhirForwarder | None = None
    """When set (`ASSAY_FHIR_URL`), interactions are forwarded there instead of the embedded store."""
    trusts_seeding: bool = False
    """Honour `X-Assay-Seed` (load a batch without validating): only `assay fhir-server`, whose
    callers hold its token; never a playground surface, where agents write."""


def base_url_of(request: Request) -> str:
    """The FHIR base of `request`: its URL up to and including the first `fhir` path segment."""
    url = str(request.url).split("?", 1)[0]
    head, sep, _ = url.partition("/fhir/")
    if sep:
        return head + "/fhir"
    return url.rstrip("/")


def _media_type(request: Request) -> str:
    """`application/json` when the client asks only for that (`_format` or `Accept`), else FHIR's."""
    wanted = request.query_params.get("_format") or request.headers.get("accept") or ""
    if "fhir+json" in wanted or ("application/json" not in wanted and wanted != "json"):
        return FHIR_JSON
    return "application/json"


_JSON_FORMATS = frozenset({"json", "application/json", FHIR_JSON, "application/json+fhir"})
_ANY = frozenset({"*/*", "application/*"})


def _acceptable(request: Request) -> bool:
    """Whether the client takes JSON (R4 http.html "Content Types": `_format` overrides `Accept`;
    a server SHALL answer 406 for a format it does not support). No `Accept` takes anything."""
    wanted = request.query_params.get("_format")
    if wanted is not None:
        return wanted.strip().lower() in _JSON_FORMATS
    accept = request.headers.get("accept", "").strip()
    if not accept:
        return True
    for item in accept.split(","):
        media, *params = (part.strip().lower() for part in item.split(";"))
        if "q=0" in params or "q=0.0" in params:
            continue
        if media in _JSON_FORMATS or media in _ANY or media.endswith("+json"):
            return True
    return False


def _not_acceptable(request: Request) -> Callable[[bytes], FhirResult] | None:
    if _acceptable(request):
        return None
    what = request.query_params.get("_format") or request.headers.get("accept")

    def refuse(_: bytes) -> FhirResult:
        raise FhirError(
            406, f"this server answers {FHIR_JSON} or application/json only, not {what}", "not-supported"
        )

    return refuse


_ISSUE_CODES = {
    400: "invalid",
    401: "login",
    403: "forbidden",
    404: "not-found",
    409: "conflict",
    413: "too-costly",
    422: "invalid",
    429: "throttled",
    503: "transient",
}


class _FhirRoute(APIRoute):
    """A FHIR route answers every error as an OperationOutcome, as a FHIR client reads every error
    (R4 http.html). An error raised outside the FHIR work (a refused run token, a task run that
    ended, a rate limit, a NUL in the run's id, a saturated database) is answered by the app's
    error boundary as usual, and its status, headers and message are kept in an OperationOutcome:
    before, only 401/403 were, and a 404, 409, 429 or 503 came back in the API's envelope as
    `application/json`, which the FHIR routes' OpenAPI (and a FHIR client) does not expect."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                response: Response = await handler(request)
            except Exception as exc:
                answer = await _boundary(request, exc)
                return _as_outcome(answer, _media_type(request))
            return response

        return handle


async def _boundary(request: Request, exc: Exception) -> Response:
    """What the app's error handlers answer for `exc` (the closest handler by class); re-raised
    when none takes it."""
    handlers = request.app.exception_handlers
    for kind in type(exc).__mro__:
        found = handlers.get(kind)
        if found is not None:
            answer = found(request, exc)
            if inspect.isawaitable(answer):
                answer = await answer
            return cast(Response, answer)
    raise exc


def _as_outcome(answer: Response, media_type: str) -> Response:
    body = bytes(answer.body)
    try:
        message = str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", errors="replace") or f"HTTP {answer.status_code}"
    status = answer.status_code
    outcome = operation_outcome(
        message, _ISSUE_CODES.get(status, "exception" if status >= 500 else "processing")
    )
    headers = {
        name: value
        for name, value in answer.headers.items()
        if name not in ("content-length", "content-type")
    }
    return JSONResponse(outcome, status, headers, media_type=media_type)


def _render(result: FhirResult, media_type: str) -> tuple[Response, bool]:
    """The response, and whether its body is strict JSON (no NaN or Infinity; the stores hold no
    lone surrogate, refused where bodies enter). A search answer from the cache comes rendered."""
    if result.content is not None:
        content, strict = result.content, True
    elif result.body is None:
        content, strict = b"", False
    else:
        content, strict = render_json(result.body)
    response = Response(content, result.status, result.headers, media_type=media_type if content else None)
    return response, strict


def _handle(
    surface: FhirSurface, method: str, path: str, raw: bytes, work: Callable[[], FhirResult], media_type: str
) -> Response:
    try:
        result = work()
    except FhirError as error:
        result = FhirResult(error.status, error.outcome())
    response, strict = _render(result, media_type)
    if surface.record is not None:
        surface.record(SurfaceEvent(method, path, response.status_code, raw, bytes(response.body), strict))
    return response


def _too_large(raw: bytes, relative: str) -> Callable[[bytes], FhirResult] | None:
    """SPEC §5.1 size limits: a resource 5 MB, a bundle posted to the base 50 MB (413)."""
    limit = MAX_BUNDLE_BYTES if relative.strip("/") == "" else MAX_RESOURCE_BYTES
    if len(raw) <= limit:
        return None

    def refuse(_: bytes) -> FhirResult:
        raise FhirError(413, f"the body is {len(raw)} bytes; the limit here is {limit} bytes", "too-costly")

    return refuse


_FORM = "application/x-www-form-urlencoded"


def _unreadable(request: Request, raw: bytes, reads: str | None) -> Callable[[bytes], FhirResult] | None:
    """415 when the declared `Content-Type` is not what the interaction reads: `"json"` (a resource
    or a bundle: `application/fhir+json`, `application/json`, any `…+json`) or `"form"` (`_search`).
    FHIR's HTTP rules answer 415 for a body format the server does not support; before, a JSON
    body sent as `text/plain` or form-encoded (`curl -d`) was stored, and XML was "not valid
    JSON". A body without a `Content-Type` is read as the interaction's format, and an empty body
    has no format (clients that send `application/fhir+json` on every request POST `_search`
    with its parameters in the URL)."""
    declared = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if reads is None or not declared or not raw:
        return None
    if reads == "json" and (declared.endswith("/json") or declared.endswith("+json")):
        return None
    if reads == "form" and declared == _FORM:
        return None
    wanted = f"{FHIR_JSON} or application/json" if reads == "json" else _FORM

    def refuse(_: bytes) -> FhirResult:
        raise FhirError(415, f"{request.method} here reads {wanted}, not {declared}", "not-supported")

    return refuse


def _event_path(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


async def _run(
    request: Request,
    surface: FhirSurface,
    work: Callable[[bytes], FhirResult],
    reads: str | None = None,
    *,
    inline: bool = False,
) -> Response:
    """Run `work` on the body in the thread pool and record the event; `reads` is the body format
    the interaction takes (`"json"`, `"form"`, None for none), refused with 415 before any work.

    `inline`: `work` only reads the embedded store through `EmbeddedFhir.reading` (or nothing), so
    it is first tried on the event loop under `CACHED_ONLY`; `NeedsDatabase` (raised before
    anything is rendered or recorded) sends it to the thread pool as usual. Not while the event
    log is nearly full: recording must not wait for room on the event loop.

    With an external server the request is forwarded instead of running `work`; a JSON body (and
    a PATCH's JSON Patch) gets `_json`'s strict check first, as the embedded interactions do, so
    NaN, Infinity, `1e999` or a lone surrogate is the same 400 and never reaches the server."""
    raw = await request.body()
    path = _event_path(request)
    relative = request.url.path[len(urlsplit(surface.base_url).path) :]
    refused = _not_acceptable(request) or _too_large(raw, relative) or _unreadable(request, raw, reads)
    external = surface.external
    if refused is not None:
        work = refused
    elif external is not None:
        headers = {key.lower(): value for key, value in request.headers.items()}
        query = tuple(request.query_params.multi_items())
        json_body = reads == "json" or request.method == "PATCH"  # PATCH: a JSON Patch

        def work(raw: bytes) -> FhirResult:
            if json_body:
                _json(raw)  # the embedded surface's strict-JSON 400, before anything is sent
            forwarded = ForwardedRequest(
                surface.store_id, surface.base_url, request.method, relative, query, headers, raw
            )
            return external.forward(forwarded, engine=surface.fhir.engine)

    media_type = _media_type(request)
    if inline and external is None and refused is None and has_room(surface.fhir.engine):
        token = CACHED_ONLY.set(True)
        try:
            return _handle(surface, request.method, path, raw, lambda: work(raw), media_type)
        except NeedsDatabase:
            pass
        finally:
            CACHED_ONLY.reset(token)
    return await run_in_threadpool(_handle, surface, request.method, path, raw, lambda: work(raw), media_type)


_READ_ID = re.compile(r"[A-Za-z0-9\-.]{1,64}")
"""An id `serve_cached` reads: FHIR's id syntax, so never `_history`, `_search` or `$lastn`, the
routes a two-segment path can also be."""


def serve_cached(request: Request, surface: FhirSurface, relative: str) -> Response | None:
    """A GET search (`/{type}`) or read (`/{type}/{id}`) of the embedded store answered from this
    worker's current index, with no SQL and no thread hand-off, as `search_get` and `read` answer
    it under `CACHED_ONLY`, and recorded the same way; None for any other request (the routes
    above answer it), `CatchUp` when the answer would need SQL (the index is behind the store, or
    busy) — nothing is recorded then.

    It is how the agent path skips FastAPI's routing, dependency solving and middleware for the
    requests agents send most (issue 9, `service/fast_path.py`)."""
    if surface.external is not None or not has_room(surface.fhir.engine):
        return None
    headers = request.headers
    if (
        headers.get("content-length", "0") != "0"
        or "transfer-encoding" in headers
        or not _acceptable(request)
    ):
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
        return _handle(surface, "GET", _event_path(request), b"", work, _media_type(request))
    except NeedsDatabase:
        fhir, store_id = surface.fhir, surface.store_id
        raise CatchUp(("fhir", id(fhir), store_id), lambda: fhir.catch_up(store_id)) from None
    finally:
        CACHED_ONLY.reset(token)


def _json(raw: bytes) -> Any:
    """The body as strict JSON: `parse_json`'s 400s, plus 400 for NaN, Infinity, numbers that
    overflow and lone surrogate escapes, which `json.loads` accepts but no store or client can hold
    (stored, they made the event list and the state tar.gz answer 500)."""
    value = parse_json(raw)
    problem = strict_json_problem(value)
    if problem:
        where, reason = problem
        raise FhirError(400, f"the body is not valid JSON at {where or 'the top level'}: {reason}")
    return value


_EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _unrouted(request: Request, routes: list[BaseRoute], base_url: str) -> FhirResult:
    """404, or 405 with `Allow` when another method has an interaction at this path: as an
    OperationOutcome (SPEC §5.2), not the API's envelope, which a FHIR client cannot read."""
    relative = request.url.path[len(urlsplit(base_url).path) :]
    allowed: set[str] = set()
    for route in routes:
        found = route.path_regex.match(relative) if isinstance(route, APIRoute) else None
        types = [
            v
            for k, v in (found.groupdict() if found else {}).items()
            if k in ("resource_type", "compartment")
        ]
        if found is not None and isinstance(route, APIRoute) and all(is_resource_type(t) for t in types):
            allowed |= route.methods or set()
    where = f"{request.method} {request.url.path}"
    if allowed:
        methods = ", ".join(sorted(allowed))
        outcome = operation_outcome(f"{where}: this path takes {methods}", "not-supported")
        return FhirResult(405, outcome, {"Allow": methods})
    return FhirResult(404, operation_outcome(f"{where}: no FHIR interaction at this path", "not-found"))


def _patch_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _patch_body(content_type: str, raw: bytes) -> Any:
    """A PATCH body: a JSON Patch (`application/json-patch+json`) or a FHIRPath Patch (a
    Parameters resource as `application/fhir+json` or `application/json`); 415 otherwise."""
    if content_type == _JSON_PATCH:
        return _json(raw)
    wanted = f"{_JSON_PATCH}, or a FHIRPath Patch (a Parameters resource) as {FHIR_JSON}"
    if content_type in (FHIR_JSON, "application/json"):
        body = _json(raw)
        if isinstance(body, dict) and body.get("resourceType") == "Parameters":
            return body
        raise FhirError(415, f"PATCH takes {wanted}; this {content_type} body is not a Parameters resource")
    raise FhirError(415, f"PATCH takes {wanted}, not {content_type or 'no content type'}")


def _if_match(request: Request) -> str | None:
    return request.headers.get("if-match")


def fhir_router(surface: Callable[..., Any]) -> APIRouter:
    """Routes of one FHIR base; `surface` is the dependency that yields its `FhirSurface`."""
    router = APIRouter(tags=["fhir"], route_class=_FhirRoute, responses=FHIR_ERRORS)
    resolved = Depends(surface)

    @router.get("/metadata", responses=answers("FhirCapabilityStatement"))
    async def metadata(request: Request, s: FhirSurface = resolved) -> Response:
        return await _run(
            request, s, lambda _: FhirResult(200, capability_statement(s.base_url)), inline=True
        )

    @router.post("", responses=answers("FhirBundle", description="The batch or transaction response"))
    @router.post("/", responses=answers("FhirBundle", description="The batch or transaction response"))
    async def bundle(request: Request, s: FhirSurface = resolved) -> Response:
        seeding = s.trusts_seeding and request.headers.get(SEED_HEADER) == "1"

        def work(raw: bytes) -> FhirResult:
            token = SEEDING.set(seeding)
            try:
                return post_bundle(s.fhir, s.store_id, s.base_url, _json(raw))
            finally:
                SEEDING.reset(token)

        return await _run(request, s, work, "json")

    @router.get("/_history", responses=answers("FhirBundle"))
    async def system_history(request: Request, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(request, s, lambda _: store_history(s.fhir, s.store_id, s.base_url, None, pairs))

    @router.get("/{resource_type}/_history", responses=answers("FhirBundle"))
    async def type_history(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request, s, lambda _: store_history(s.fhir, s.store_id, s.base_url, resource_type, pairs)
        )

    @router.put("/{resource_type}", responses=answers("FhirResource", 200, 201))
    async def conditional_update(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        condition = _if_match(request)
        return await _run(
            request,
            s,
            lambda raw: actions.conditional_update(
                s.fhir, s.store_id, s.base_url, resource_type, pairs, _json(raw), condition
            ),
            "json",
        )

    @router.delete("/{resource_type}", responses=answers("FhirResource", 200, 204))
    async def conditional_delete(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request, s, lambda _: actions.conditional_delete(s.fhir, s.store_id, resource_type, pairs)
        )

    @router.get("/{resource_type}", responses=answers("FhirBundle"))
    async def search_get(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        lenient = parse_prefer(request.headers.get("prefer")).lenient
        return await _run(
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

        return await _run(request, s, work, "form")

    @router.post(
        "/{resource_type}/$validate",
        responses=answers("OperationOutcome", description="The validation's issues"),
    )
    async def validate(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        return await _run(request, s, lambda raw: operations.validate(resource_type, _json(raw)), "json")

    @router.post("/{resource_type}", responses=answers("FhirResource", 200, 201))
    async def create(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        condition = request.headers.get("if-none-exist")
        pairs = list(request.query_params.multi_items())
        prefer = parse_prefer(request.headers.get("prefer"))
        return await _run(
            request,
            s,
            lambda raw: shape_write(
                actions.create(s.fhir, s.store_id, s.base_url, resource_type, _json(raw), condition, pairs),
                prefer,
            ),
            "json",
        )

    @router.get("/Observation/$lastn", responses=answers("FhirBundle"))
    async def lastn(request: Request, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request, s, lambda _: operations.lastn(s.fhir, s.store_id, s.base_url, pairs), inline=True
        )

    @router.get("/{resource_type}/{resource_id}", responses=answers("FhirResource"))
    async def read(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request,
            s,
            # parsed in the work, so a bad `_summary` is the 400 OperationOutcome (it was a 500)
            lambda _: actions.read(s.fhir, s.store_id, resource_type, resource_id, parse_subset(pairs)),
            inline=True,
        )

    @router.get("/{resource_type}/{resource_id}/_history", responses=answers("FhirBundle"))
    async def history(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request,
            s,
            lambda _: resource_history(s.fhir, s.store_id, s.base_url, resource_type, resource_id, pairs),
        )

    @router.get("/Patient/{patient_id}/$everything", responses=answers("FhirBundle"))
    async def everything(request: Request, patient_id: str, s: FhirSurface = resolved) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request,
            s,
            lambda _: operations.everything(s.fhir, s.store_id, s.base_url, patient_id, pairs),
            inline=True,
        )

    @router.get("/{compartment}/{owner_id}/{resource_type}", responses=answers("FhirBundle"))
    async def compartment_search(
        request: Request, compartment: str, owner_id: str, resource_type: str, s: FhirSurface = resolved
    ) -> Response:
        pairs = list(request.query_params.multi_items())
        return await _run(
            request,
            s,
            lambda _: operations.compartment_search(
                s.fhir, s.store_id, s.base_url, compartment, owner_id, resource_type, pairs
            ),
            inline=True,
        )

    @router.get("/{resource_type}/{resource_id}/_history/{version_id}", responses=answers("FhirResource"))
    async def vread(
        request: Request, resource_type: str, resource_id: str, version_id: str, s: FhirSurface = resolved
    ) -> Response:
        return await _run(
            request, s, lambda _: actions.vread(s.fhir, s.store_id, resource_type, resource_id, version_id)
        )

    @router.put("/{resource_type}/{resource_id}", responses=answers("FhirResource", 200, 201))
    async def update(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        condition = _if_match(request)
        prefer = parse_prefer(request.headers.get("prefer"))
        return await _run(
            request,
            s,
            lambda raw: shape_write(
                actions.update(
                    s.fhir, s.store_id, s.base_url, resource_type, resource_id, _json(raw), condition
                ),
                prefer,
            ),
            "json",
        )

    @router.patch("/{resource_type}/{resource_id}", responses=answers("FhirResource"))
    async def patch(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        condition = _if_match(request)
        content_type = _patch_type(request)
        prefer = parse_prefer(request.headers.get("prefer"))

        def work(raw: bytes) -> FhirResult:
            body = _patch_body(content_type, raw)
            return shape_write(
                actions.patch(s.fhir, s.store_id, resource_type, resource_id, body, condition), prefer
            )

        return await _run(request, s, work)

    @router.patch("/{resource_type}", responses=answers("FhirResource"))
    async def conditional_patch(request: Request, resource_type: str, s: FhirSurface = resolved) -> Response:
        if not is_resource_type(resource_type):  # `PATCH /metadata`: the 405 it always was
            return await refuse(request, s)
        pairs = list(request.query_params.multi_items())
        condition = _if_match(request)
        content_type = _patch_type(request)
        prefer = parse_prefer(request.headers.get("prefer"))

        def work(raw: bytes) -> FhirResult:
            body = _patch_body(content_type, raw)
            result = actions.conditional_patch(s.fhir, s.store_id, resource_type, pairs, body, condition)
            return shape_write(result, prefer)

        return await _run(request, s, work)

    @router.delete("/{resource_type}/{resource_id}", responses=answers("FhirResource", 200, 204))
    async def delete(
        request: Request, resource_type: str, resource_id: str, s: FhirSurface = resolved
    ) -> Response:
        condition = _if_match(request)
        return await _run(
            request, s, lambda _: actions.delete(s.fhir, s.store_id, resource_type, resource_id, condition)
        )

    interactions = list(router.routes)

    async def refuse(request: Request, s: FhirSurface) -> Response:
        """404 or 405 from `_unrouted`, never forwarded, recorded like every other request."""
        raw = await request.body()
        result = _unrouted(request, interactions, s.base_url)
        media_type = _media_type(request)
        return await run_in_threadpool(
            _handle, s, request.method, _event_path(request), raw, lambda: result, media_type
        )

    @router.get("", include_in_schema=False)
    @router.get("/", include_in_schema=False)
    async def base_search(request: Request, s: FhirSurface = resolved) -> Response:
        """A GET on the base with a query: a paging link there (an external HAPI server pages every
        search with `next` links `[base]?_getpages=…`) or a system-level search, forwarded to an
        external server (each strategy keeps it to the playground). The embedded store serves
        neither, so there, and on any backend without a query, it is the 405 it always was
        (`Allow: POST`; `interactions` does not list this route)."""
        if s.external is None or not request.url.query:
            return await refuse(request, s)
        # `_run` forwards the request; the work given is what the embedded store would answer.
        return await _run(request, s, lambda _: _unrouted(request, interactions, s.base_url))

    @router.api_route("", methods=_EVERY_METHOD, include_in_schema=False)
    @router.api_route("/{unrouted:path}", methods=_EVERY_METHOD, include_in_schema=False)
    async def unrouted(request: Request, s: FhirSurface = resolved) -> Response:
        """Anything no route above takes; answered here (never forwarded to an external server)."""
        return await refuse(request, s)

    return router
