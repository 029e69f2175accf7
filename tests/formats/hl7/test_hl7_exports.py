"""The public surface of `assay.formats.hl7` is its sorted `__all__` (style.md, after httpx)."""

from __future__ import annotations

import assay.formats.hl7 as package


def test_all_is_sorted_and_complete() -> None:
    assert package.__all__ == sorted(package.__all__)
    for name in package.__all__:
        assert hasattr(package, name), name
    public = {name for name in vars(package) if not name.startswith("_")} - {"annotations"}
    assert public == set(package.__all__)
