"""`bulk_loading`: the garbage collector is off inside, back on after (also on error, also when
loads overlap), and what was loaded is frozen out of later collections. `settle_heap`: a serving
process's heap is frozen at start and after first use, and collectable again when it stops."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from assay.core.memory import bulk_loading, release_heap, settle_heap, settled


def test_collection_is_off_inside_and_back_on_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), bulk_loading():
        assert not gc.isenabled()
        raise RuntimeError("a load that fails")
    assert gc.isenabled()


def test_nested_loads_turn_it_back_on_once_and_freeze_what_they_loaded() -> None:
    with bulk_loading():
        with bulk_loading():
            loaded = [{"resourceType": "Patient", "id": str(i)} for i in range(100)]
        assert not gc.isenabled()  # the outer load still runs
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(loaded)


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with bulk_loading():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _scanned() -> set[int]:
    """Ids of what a full collection scans now (the permanent generation is not scanned)."""
    return {id(o) for o in gc.get_objects()}


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture
def first_server() -> Iterator[None]:
    if settled():
        pytest.skip("a server of this test process already settled the heap")
    yield
    while settled():
        release_heap()


@pytest.mark.usefixtures("first_server")
def test_a_settled_heap_is_out_of_full_collections_until_the_last_server_stops() -> None:
    """A full collection of a server's heap rescanned everything it imported and built (~270,000
    objects, a ~230 ms pause that stalled every call on the phone line); settled, it scans only
    what is newer, and a second server in the process changes nothing until both have stopped."""
    before = {"loaded": [{"resource": i} for i in range(100)]}
    settle_heap()
    settle_heap()  # a second server while the first serves
    after = ["made while serving"]  # a list: always tracked (a dict of strings is not)
    scanned = _scanned()
    assert id(before) not in scanned and id(before["loaded"][0]) not in scanned
    assert id(after) in scanned
    release_heap()
    assert settled() == 1 and gc.get_freeze_count() > 0 and id(before) not in _scanned()
    release_heap()
    assert settled() == 0 and gc.get_freeze_count() == 0 and id(before) in _scanned()


@pytest.mark.usefixtures("first_server")
def test_what_first_use_built_is_frozen_before_the_first_full_collection_scans_it() -> None:
    settle_heap()
    built_on_first_use = [{"route": i} for i in range(1000)]
    assert id(built_on_first_use) in _scanned()
    gc.collect()  # the first full collection since: it freezes first, then has nothing to scan
    assert id(built_on_first_use) not in _scanned()
    later = ["made after warm-up"]
    gc.collect()
    assert id(later) in _scanned()  # only once: later full collections scan what is newer


@pytest.mark.usefixtures("first_server")
def test_a_cycle_frozen_with_the_heap_is_collected_when_the_server_stops() -> None:
    cycle = _Node()
    freed = weakref.ref(cycle)
    settle_heap()
    del cycle
    gc.collect()
    assert freed() is not None  # frozen: the cost of settling, once per process
    release_heap()
    assert freed() is None
