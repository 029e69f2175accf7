"""`bulk_loading`: the garbage collector is off inside, back on after (also on error, also when
loads overlap), and what was loaded is frozen out of later collections."""

from __future__ import annotations

import gc

import pytest

from assay.core.memory import bulk_loading


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
