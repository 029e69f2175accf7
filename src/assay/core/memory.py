"""Bulk loading without the garbage collector in the loop (for big datasets).

Decoding and indexing 137k FHIR resources allocates tens of millions of containers; CPython's
cyclic collector runs a full pass each time the oldest generation grows by a quarter, so the
collector rescanned everything loaded so far again and again (73-85 s of a 149 s `start`, pauses
up to 5 s, long enough for uvicorn to kill a PostgreSQL worker). JSON trees hold no reference
cycles: plain reference counting frees them, and the collector has nothing to find in them.

`bulk_loading()` turns automatic collection off while a load runs (back on in `finally`, also on
error; nested and concurrent loads share one count, so the last one out turns it back on) and then
moves everything alive to the permanent generation (`gc.freeze`), so later collections skip the
loaded data instead of rescanning it. The cost: a reference cycle that was garbage at that moment
is never collected; loads happen a few times per process, so that is bounded.

`collection_paused()` is the same pause without the freeze, for work whose allocations die with
it (a big request body, parsed and checked: `service/json_bodies.py`); it shares the count, so a
bulk load that overlaps it is still frozen when the last of them ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["bulk_loading", "bulk_loads", "collection_paused"]

_lock = threading.Lock()
_active = 0
_was_enabled = True
_freeze = False
"""Whether a bulk load ran since collection was turned off (so the last one out freezes)."""
bulk_loads = 0
"""How many bulk loads have finished in this process (for tests and diagnostics)."""


@contextmanager
def bulk_loading() -> Iterator[None]:
    """No automatic garbage collection while the block runs; what it loaded is frozen after."""
    with _paused(freeze=True):
        yield


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic garbage collection while the block runs; nothing frozen after."""
    with _paused(freeze=False):
        yield


@contextmanager
def _paused(*, freeze: bool) -> Iterator[None]:
    global _active, _was_enabled, _freeze, bulk_loads
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1
        _freeze = _freeze or freeze
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if freeze:
                bulk_loads += 1
            if _active == 0:
                if _freeze:
                    gc.freeze()
                    _freeze = False
                if _was_enabled:
                    gc.enable()
