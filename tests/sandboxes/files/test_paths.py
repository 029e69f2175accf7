"""`clean_path`: one normal form, escapes refused (hypothesis: never above the root)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.sandboxes.files import BadPath, clean_path


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("/", ""),
        ("", ""),
        ("/inbox//a.txt", "inbox/a.txt"),
        ("./inbox/./a.txt", "inbox/a.txt"),
        ("inbox/../outbox/b", "outbox/b"),
        (b"/caf\xc3\xa9.txt", "café.txt"),
    ],
)
def test_normal_form(raw: str | bytes, clean: str) -> None:
    assert clean_path(raw) == clean


@pytest.mark.parametrize(
    "raw", ["..", "/../etc/passwd", "a/../../b", "a\x00b", "a\nb", b"\xff", "x" * 256, "a/" * 600]
)
def test_refused(raw: str | bytes) -> None:
    with pytest.raises(BadPath):
        clean_path(raw)


@given(st.lists(st.sampled_from(["..", ".", "", "a", "b", "ü"]), max_size=12))
def test_never_above_the_root(segments: list[str]) -> None:
    raw = "/".join(segments)
    try:
        clean = clean_path(raw)
    except BadPath:
        return
    assert ".." not in clean.split("/") and not clean.startswith("/") and "//" not in clean
