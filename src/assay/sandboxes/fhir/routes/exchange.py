"""How every FHIR interaction is exchanged: the surface a route serves (`FhirSurface`), content
negotiation, the size and format refusals, the thread-pool (or cached, on the event loop) run of the
interaction's work, its OperationOutcome on failure and the sandbox event it records.

Each route module (`reads`, `writes`, `history`, `operations`) hands `run` the work of one
interaction; nothing here knows which interaction it is.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from assay.formats.fhir import is_resource_type
from assay.sandboxes.events import has_room
from assay.sandboxes.fhir.actions import parse_json
from assay.sandboxes.fhir.external import FhirForwarder, ForwardedRequest
from assay.sandboxes.fhir.outcomes import FhirError, operation_outcome
from assay.sandboxes.fhir.rendering import render_json
from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.store import CACHED_ONLY, EmbeddedFhir, NeedsDatabase
from assay.store.json_values import strict_json_problem

__all__ = [
    "EVERY_METHOD",
    "FHIR_JSON",
    "MAX_BUNDLE_BYTES",
    "MAX_RESOURCE_BYTES",
    "FhirRoute",
    "FhirSurface",
    "SurfaceEvent",
    "acceptable",
    "base_url_of",
    "event_path",
    "handle",
    "if_match",
    "json_body",
    "media_type_of",
    "patch_body",
    "patch_type",
    "refuse",
    "render",
    "run",
    "unrouted_answer",
]

FHIR_JSON = "application/fhir+json"
_JSON_PATCH = "application/json-patch+json"
MAX_RESOURCE_BYTES = 5 * 1000 * 1000
MAX_BUNDLE_BYTES = 50 * 1000 * 1000


@dataclass(frozen=True, slots=True)
class SurfaceEvent:
    """One request to the surface, as the event log records it (`fhir_request` in docs/api.md)."""

    method: str
    path: str
    status: int
    request: bytes
    response: bytes
    response_json: bool = False
    """The response is strict JSON rendered here (`render`), so the event log stores it as is."""


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


def media_type_of(request: Request) -> str:
    """`application/json` when the client asks only for that (`_format` or `Accept`), else FHIR's."""
    wanted = request.query_params.get("_format") or request.headers.get("accept") or ""
    if "fhir+json" in wanted or ("application/json" not in wanted and wanted != "json"):
        return FHIR_JSON
    return "application/json"


_JSON_FORMATS = frozenset({"json", "application/json", FHIR_JSON, "application/json+fhir"})
_ANY = frozenset({"*/*", "application/*"})


def acceptable(request: Request) -> bool:
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
    if acceptable(request):
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


class FhirRoute(APIRoute):
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
                return _as_outcome(answer, media_type_of(request))
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


def render(result: FhirResult, media_type: str) -> tuple[Response, bool]:
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


def handle(
    surface: FhirSurface, method: str, path: str, raw: bytes, work: Callable[[], FhirResult], media_type: str
) -> Response:
    try:
        result = work()
    except FhirError as error:
        result = FhirResult(error.status, error.outcome())
    response, strict = render(result, media_type)
    if surface.record is not None:
        surface.record(SurfaceEvent(method, path, response.status_code, raw, bytes(response.body), strict))
    return response


def _too_large(raw: bytes, relative: str) -> Callable[[bytes], FhirResult] | None:
    """Size limits (docs/sandboxes.md): a resource 5 MB, a bundle posted to the base 50 MB (413)."""
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


def event_path(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


async def run(
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
    a PATCH's JSON Patch) gets `json_body`'s strict check first, as the embedded interactions do, so
    NaN, Infinity, `1e999` or a lone surrogate is the same 400 and never reaches the server."""
    raw = await request.body()
    path = event_path(request)
    relative = request.url.path[len(urlsplit(surface.base_url).path) :]
    refused = _not_acceptable(request) or _too_large(raw, relative) or _unreadable(request, raw, reads)
    external = surface.external
    if refused is not None:
        work = refused
    elif external is not None:
        headers = {key.lower(): value for key, value in request.headers.items()}
        query = tuple(request.query_params.multi_items())
        reads_json = reads == "json" or request.method == "PATCH"  # PATCH: a JSON Patch

        def work(raw: bytes) -> FhirResult:
            if reads_json:
                json_body(raw)  # the embedded surface's strict-JSON 400, before anything is sent
            forwarded = ForwardedRequest(
                surface.store_id, surface.base_url, request.method, relative, query, headers, raw
            )
            return external.forward(forwarded, engine=surface.fhir.engine)

    media_type = media_type_of(request)
    if inline and external is None and refused is None and has_room(surface.fhir.engine):
        token = CACHED_ONLY.set(True)
        try:
            return handle(surface, request.method, path, raw, lambda: work(raw), media_type)
        except NeedsDatabase:
            pass
        finally:
            CACHED_ONLY.reset(token)
    return await run_in_threadpool(handle, surface, request.method, path, raw, lambda: work(raw), media_type)


def json_body(raw: bytes) -> Any:
    """The body as strict JSON: `parse_json`'s 400s, plus 400 for NaN, Infinity, numbers that
    overflow and lone surrogate escapes, which `json.loads` accepts but no store or client can hold
    (stored, they made the event list and the state tar.gz answer 500)."""
    value = parse_json(raw)
    problem = strict_json_problem(value)
    if problem:
        where, reason = problem
        raise FhirError(400, f"the body is not valid JSON at {where or 'the top level'}: {reason}")
    return value


EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def unrouted_answer(request: Request, routes: list[BaseRoute], base_url: str) -> FhirResult:
    """404, or 405 with `Allow` when another method has an interaction at this path: as an
    OperationOutcome (docs/sandboxes.md), not the API's envelope, which a FHIR client cannot read."""
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


def patch_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def patch_body(content_type: str, raw: bytes) -> Any:
    """A PATCH body: a JSON Patch (`application/json-patch+json`) or a FHIRPath Patch (a
    Parameters resource as `application/fhir+json` or `application/json`); 415 otherwise."""
    if content_type == _JSON_PATCH:
        return json_body(raw)
    wanted = f"{_JSON_PATCH}, or a FHIRPath Patch (a Parameters resource) as {FHIR_JSON}"
    if content_type in (FHIR_JSON, "application/json"):
        body = json_body(raw)
        if isinstance(body, dict) and body.get("resourceType") == "Parameters":
            return body
        raise FhirError(415, f"PATCH takes {wanted}; this {content_type} body is not a Parameters resource")
    raise FhirError(415, f"PATCH takes {wanted}, not {content_type or 'no content type'}")


def if_match(request: Request) -> str | None:
    return request.headers.get("if-match")


async def refuse(request: Request, surface: FhirSurface, interactions: list[BaseRoute]) -> Response:
    """404 or 405 from `unrouted_answer`, never forwarded, recorded like every other request."""
    raw = await request.body()
    result = unrouted_answer(request, interactions, surface.base_url)
    media_type = media_type_of(request)
    return await run_in_threadpool(
        handle, surface, request.method, event_path(request), raw, lambda: result, media_type
    )
