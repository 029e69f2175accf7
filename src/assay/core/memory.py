"""The cyclic garbage collector kept out of bulk loads (big datasets) and off a serving heap.

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

`settle_heap()` is the same idea for a server process (docs/decisions/load.md, "Garbage
collection in a serving process"). Once the app has started, what it imported and built is
collected once and frozen: a full collection while it serves no longer rescans ~270,000 objects
(a 230 ms pause on the 2-core machine, every request in flight stalled behind it). What first use
builds (FastAPI builds a router's route models at its first request; caches fill) is frozen when
the first full collection after that is due (by then the heap has grown by a quarter), before
that collection runs, so it has nothing to scan. The cost: a reference cycle that was already
garbage at that moment stays, once per process. Later full collections scan only what is newer.
`release_heap()` undoes it when the last server in the process stops (a test process starts and
stops many) and collects then, at the stop rather than at some later moment of the process.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["bulk_loading", "bulk_loads", "collection_paused", "release_heap", "settle_heap", "settled"]

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


_settled = 0
"""Servers in this process between `settle_heap` and `release_heap`."""
_warming_up = False
"""Whether the first full collection since the heap was settled is still to come."""


def _freeze_at_first_full_collection(phase: str, info: dict[str, int]) -> None:
    # A collection callback: it takes no lock (a collection can start while `_lock` is held).
    global _warming_up
    if phase == "start" and info["generation"] == 2 and _warming_up:
        _warming_up = False
        gc.freeze()  # before the collection: it finds nothing to scan


def settle_heap() -> None:
    """A server has started in this process: the first collects its start-up garbage and freezes
    the rest, and freezes again when the first full collection after is due (first use is behind
    it: the heap has grown by a quarter). A server started while another serves freezes nothing."""
    global _settled, _warming_up
    with _lock:
        _settled += 1
        if _settled > 1:
            return
        gc.collect()
        gc.freeze()
        _warming_up = True
        gc.callbacks.append(_freeze_at_first_full_collection)


def release_heap() -> None:
    """A server of this process has stopped. With the last, what was frozen is collectable again,
    and collected now: the process that goes on (a test run, a command that served in-process)
    would otherwise pay for that full collection at a moment of its own."""
    global _settled, _warming_up
    with _lock:
        if _settled == 0:
            return
        _settled -= 1
        if _settled:
            return
        _warming_up = False
        if _freeze_at_first_full_collection in gc.callbacks:
            gc.callbacks.remove(_freeze_at_first_full_collection)
        gc.unfreeze()
        gc.collect()


def settled() -> int:
    """Servers in this process whose heap is settled (for tests and diagnostics)."""
    return _settled
