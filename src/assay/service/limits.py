"""Request limits (SPEC §5, §5.1): per-token rate limits and the request body cap.

Rate limits (`RATE_LIMITED`, configurable, off by default in embedded mode):
A token bucket per token in each worker process: `ASSAY_RATE_LIMIT` requests per second,
`ASSAY_RATE_LIMIT_BURST` at once. With N workers a token may get up to N times the rate; a shared
limiter (PostgreSQL or Redis) would be the next step if that ever matters.
"""

from __future__ import annotations

import json
import threading
import time

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BodySizeLimit", "RateLimiter"]


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
                    await self._refuse(send)
                    return
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send) -> None:
        message = f"request body is larger than {self.max_bytes} bytes"
        body = json.dumps({"error": {"code": "BAD_REQUEST", "message": message, "details": {}}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
