"""Ids and timestamps as the wire shows them (docs/api.md: `<prefix><ULID>`, RFC 3339 UTC, `Z`, ms).

Ids are ULIDs made monotonic within one process, so rows created in the same millisecond keep
their creation order when sorted by id (criteria are walked in creation order, docs/assertions.md).
"""

from __future__ import annotations

import os
import random
import threading
import time
from datetime import UTC, datetime

from ulid import ULID

__all__ = ["iso", "new_id", "utcnow"]

_lock = threading.Lock()
_last = (0, 0)
_random = random.Random(os.urandom(32))
"""The random part of a new millisecond: ids are not secrets (tokens are `secrets`), and
`os.urandom`'s system call on every event id was 2.5% of a worker's time on the agent path under
load. Seeded per process (workers are spawned, each imports this afresh)."""


def new_id(prefix: str) -> str:
    """`<prefix><ULID>`; strictly increasing within this process."""
    global _last
    with _lock:
        ms = time.time_ns() // 1_000_000
        last_ms, last_rand = _last
        if ms <= last_ms:
            ms, rand = last_ms, last_rand + 1
        else:
            rand = _random.getrandbits(79)
        _last = (ms, rand)
    return prefix + str(ULID.from_bytes(ms.to_bytes(6, "big") + rand.to_bytes(10, "big")))


def utcnow() -> datetime:
    """Now, truncated to milliseconds so stored and printed instants agree exactly."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def iso(value: datetime | None) -> str | None:
    """RFC 3339 UTC with milliseconds and `Z`, e.g. `2026-01-02T03:04:05.678Z`."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
