"""Per-token rate limits (SPEC §5: `RATE_LIMITED`, configurable, off by default in embedded mode).

A token bucket per token in each worker process: `ASSAY_RATE_LIMIT` requests per second,
`ASSAY_RATE_LIMIT_BURST` at once. With N workers a token may get up to N times the rate; a shared
limiter (PostgreSQL or Redis) would be the next step if that ever matters.
"""

from __future__ import annotations

import threading
import time

__all__ = ["RateLimiter"]


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
