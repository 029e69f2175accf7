"""Request limits (docs/api.md): per-token rate limits and the request body cap.

Rate limits (`RATE_LIMITED`, configurable, off by default in embedded mode):
A token bucket per token in each worker process: `ASSAY_RATE_LIMIT` requests per second,
`ASSAY_RATE_LIMIT_BURST` at once. With N workers a token may get up to N times the rate; a shared
limiter (PostgreSQL or Redis) would be the next step if that ever matters.
"""

from __future__ import annotations

import threading
import time

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assay.service.errors import envelope
from assay.service.json_bodies import body_checked, body_problem
from assay.store.errors import BadRequest
from assay.store.json_values import NUL_TEXT

__all__ = ["BodySizeLimit", "RateLimiter", "json_body_limit", "payload_too_large", "storable_parameters"]


class RateLimiter:
    def __init__(self, rate: float, burst: int | None = None):
        self.rate = rate
        self.burst = float(burst if burst is not None else max(1, int(rate)))
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str) -> float:
        """Take one request from `key`'s bucket: 0 when allowed, else seconds until one is."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate


class _BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` once a streamed body passes the cap. An HTTPException because FastAPI
    turns any other error met while reading a body into 400 "error parsing the body"; the app's
    handler answers it (413 `PAYLOAD_TOO_LARGE` envelope), `BodySizeLimit` itself when no route read it."""

    def __init__(self, max_bytes: int):
        super().__init__(413, _too_large(max_bytes))


def _too_large(max_bytes: int) -> str:
    return f"request body is larger than {max_bytes} bytes"


def payload_too_large(max_bytes: int) -> JSONResponse:
    """The refusal of a body over the cap (413 `PAYLOAD_TOO_LARGE`)."""
    return envelope(413, "PAYLOAD_TOO_LARGE", _too_large(max_bytes))


class BodySizeLimit:
    """Refuse a body over the cap with 413 in the envelope of docs/api.md: a declared `Content-Length`
    before anything is read; a chunked body (no length) as soon as the bytes received pass the
    cap, so it is never buffered whole. Either way nothing of the request is acted on."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        has_body = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
                has_body = value != b"0"
            elif name == b"transfer-encoding":
                has_body = True
        if not has_body:  # no body to count (most agent requests): no wrappers on the hot path
            await self.app(scope, receive, send)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge(self.max_bytes)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except _BodyTooLarge:
            if started:  # a streaming route already answered; nothing more can be said
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await payload_too_large(self.max_bytes)(scope, receive, send)


async def json_body_limit(request: Request) -> None:
    """A router dependency: a JSON body nested past `MAX_JSON_DEPTH` is a 400 `BAD_REQUEST`; one
    that is not strict JSON (NaN, Infinity, a number that overflows, a lone surrogate escape:
    `store.json_values`) or holds a NUL is a 422 `VALIDATION_ERROR` naming the key, like any value
    the database cannot hold; a NUL in a path or query parameter is a 400 `BAD_REQUEST` naming it.

    FastAPI has parsed the body before dependencies run (`request.json()` is cached, so this costs
    the depth walk and the strict check's encode, no second parse), and they run before the body
    is validated, stored or echoed. A body of `json_bodies.BIG_BODY` bytes or more was parsed and
    checked on a worker thread before FastAPI read it; its verdict is raised here, at the same point.
    A body that does not parse at all is FastAPI's to report; the
    FHIR routes check their own bodies. Non-strict JSON used to be stored (SQLite), refused by
    PostgreSQL as "too large", or crash the response (`agent: {"a": NaN}` on
    `POST /v1/benchmark-runs` dropped the connection). A NUL was stored by SQLite and refused by
    PostgreSQL's `text` (422 "too large", no key); checked here, both backends answer alike.
    """
    storable_parameters(request)
    checked = body_checked(request)
    if checked is not None:  # a big body, parsed and checked on a worker thread (json_bodies.py)
        if checked.problem is not None:
            raise checked.problem
        return
    if not await request.body():
        return
    try:
        value = await request.json()
    except Exception:  # unparseable or not JSON: FastAPI already answered or the route reads raw bytes
        return
    problem = body_problem(value)
    if problem is not None:
        raise problem


def storable_parameters(request: Request, *names: str) -> None:
    """400 naming the first path or query parameter (of `names`, else any) with a NUL: no stored
    row can match it, and PostgreSQL refuses to compare with it (a `DataError`, a 422 with no key),
    where SQLite found nothing."""
    located = [("path", request.path_params.items()), ("query", request.query_params.multi_items())]
    for where, items in located:
        for name, value in items:
            if names and name not in names:
                continue
            if "\x00" in str(value) or "\x00" in name:
                key = where + "." + name.replace("\x00", "\\x00")
                raise BadRequest(f"invalid parameter {key}: {NUL_TEXT}", {key: [NUL_TEXT]})
