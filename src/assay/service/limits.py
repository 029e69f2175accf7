"""Request limits (SPEC §5, §5.1): per-token rate limits and the request body cap.

Rate limits (`RATE_LIMITED`, configurable, off by default in embedded mode):
A token bucket per token in each worker process: `ASSAY_RATE_LIMIT` requests per second,
`ASSAY_RATE_LIMIT_BURST` at once. With N workers a token may get up to N times the rate; a shared
limiter (PostgreSQL or Redis) would be the next step if that ever matters.
"""

from __future__ import annotations

import threading
import time

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from assay.sandboxes.json_depth import MAX_JSON_DEPTH, nested_deeper_than
from assay.service.errors import envelope
from assay.store.errors import BadRequest, Invalid
from assay.store.json_values import strict_json_problem

__all__ = ["BodySizeLimit", "RateLimiter", "json_body_limit"]


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


class BodySizeLimit:
    """Refuse a declared `Content-Length` over the cap with 413 in the SPEC §5 envelope, before the
    body is read. Chunked bodies without a length are not capped here."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"request body is larger than {self.max_bytes} bytes"
        await envelope(413, "BAD_REQUEST", message)(scope, receive, send)


async def json_body_limit(request: Request) -> None:
    """A router dependency: a JSON body nested past `MAX_JSON_DEPTH` is a 400 `BAD_REQUEST`; one
    that is not strict JSON (NaN, Infinity, a number that overflows, a lone surrogate escape:
    `store.json_values`) is a 422 `VALIDATION_ERROR` naming the key, like any value the database
    cannot hold.

    FastAPI has parsed the body before dependencies run (`request.json()` is cached, so this costs
    the depth walk and the strict check's encode, no second parse), and they run before the body
    is validated, stored or echoed. A body that does not parse at all is FastAPI's to report; the
    FHIR routes check their own bodies. Non-strict JSON used to be stored (SQLite), refused by
    PostgreSQL as "too large", or crash the response (`agent: {"a": NaN}` on
    `POST /v1/benchmark-runs` dropped the connection).
    """
    if not await request.body():
        return
    try:
        value = await request.json()
    except Exception:  # unparseable or not JSON: FastAPI already answered or the route reads raw bytes
        return
    if nested_deeper_than(value):
        raise BadRequest(f"request body is nested more than {MAX_JSON_DEPTH} levels deep")
    problem = strict_json_problem(value)
    if problem:
        where, reason = problem
        raise Invalid({where or "body": [reason]})
