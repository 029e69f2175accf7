"""Every bundled X12 fixture either parses or fails with a clear `X12ParseError`.

`.csv` files under `x12/` are expected-output tables of edi-835-parser, not X12. Differential
checks ride along (style.md, after h11's tests against the standard library): each parsed
segment equals a naive split of the file by the delimiters its ISA declares and what pyx12's
independent tokenizer reads, and writing the model back and re-reading it gives the same segments.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import pyx12.x12file
from tests.conftest import FIXTURES

from assay.formats.x12 import X12Document, X12ParseError, parse_x12, tokenize, write_x12

X12_FILES = sorted(p for p in (FIXTURES / "x12").rglob("*") if p.is_file() and p.suffix != ".csv")

MALFORMED = {
    "edi-835-parser/blue_cross_nc_sample.txt": "does not start with an ISA interchange header",
    "imsweb/837_5010/x12_no_isa_line.txt": "does not start with an ISA interchange header",
    "imsweb/837_5010/x12_bad_segment_identifier.txt": "bad segment identifier",
    "x12-types/837/parse_837_4.x12": "does not start with an ISA interchange header",
    "x12-types/837/parse_837_5.x12": "does not start with an ISA interchange header",
}


def _name(path: Path) -> str:
    return path.relative_to(FIXTURES / "x12").as_posix()


def test_the_walk_sees_every_fixture() -> None:
    assert len(X12_FILES) > 200
    assert all((FIXTURES / "x12" / name).is_file() for name in MALFORMED)


@pytest.mark.parametrize("path", X12_FILES, ids=_name)
def test_fixture_parses_or_fails_clearly(path: Path) -> None:
    data = path.read_bytes()
    expected_error = MALFORMED.get(_name(path))
    if expected_error is not None:
        with pytest.raises(X12ParseError, match=expected_error) as info:
            parse_x12(data)
        assert info.value.segment is not None and info.value.offset is not None
        return
    document = parse_x12(data)
    segments = list(document.segments())
    assert segments[0].id == "ISA"
    _same_as_naive_split(data.decode("utf-8-sig", "replace"), document)
    for transaction in document.transactions():
        tree = transaction.loops
        assert sorted(tree.all_positions()) == list(range(len(transaction.segments)))
    again = parse_x12(write_x12(document))
    assert _content(again) == _content(document)
    assert not [w for w in again.all_warnings() if "says" in w or "does not match" in w]


def _content(document: X12Document) -> list[tuple[str, tuple]]:
    """Segments other than ISA and the trailers (which the writer recomputes), normalized."""
    return [
        (
            s.id,
            _trim([tuple(_trim([tuple(_trim(list(rep))) for rep in element])) for element in s.structure()]),
        )
        for s in document.segments()
        if s.id not in ("ISA", "SE", "GE", "IEA")
    ]


def _trim(values: list) -> tuple:
    """Drop trailing empty values (X12 suppresses trailing delimiters)."""
    while values and values[-1] in ("", (), ((),)):
        values.pop()
    return tuple(values)


def _same_as_naive_split(text: str, document: X12Document) -> None:
    """With one interchange, segments equal the file split by its own terminator and separator."""
    if len(document.interchanges) > 1:
        return
    delimiters = document.interchanges[0].delimiters
    pieces = [p.lstrip("\r\n\t ").rstrip("\r\n") for p in text.split(delimiters.segment)]
    naive = [p.split(delimiters.element) for p in pieces if p and not p.startswith("ISA")]
    ours = [[s.id, *s.elements] for s in tokenize(text) if s.id != "ISA"]
    assert ours == naive


PYX12_READABLE = [p for p in X12_FILES if _name(p) not in MALFORMED]


@pytest.mark.parametrize("path", PYX12_READABLE, ids=_name)
def test_segments_equal_pyx12s_reader(path: Path) -> None:
    """Differential: pyx12's own tokenizer (`X12Reader`) reads the same segments and elements.

    pyx12 drops trailing empty components (`SV2*0100*  :` → `  `), so both sides are compared
    with trailing empty components and elements trimmed. Files pyx12 refuses are skipped.
    """
    text = path.read_bytes().decode("utf-8", "replace")
    try:
        theirs = list(pyx12.x12file.X12Reader(io.StringIO(text)))
    except Exception:  # pyx12 rejects some inputs we accept (short ISA, several interchanges)
        pytest.skip("pyx12 cannot read this file")
    ours = list(tokenize(text))
    assert [s.id for s in ours] == [s.get_seg_id() for s in theirs]
    d = ours[0].delimiters
    for mine, their in zip(ours[1:], theirs[1:], strict=True):
        expected = their.format(d.segment, d.element, d.component).rstrip(d.segment)
        assert _trimmed(str(mine), d.element, d.component) == _trimmed(expected, d.element, d.component)


def _trimmed(text: str, element: str, component: str) -> str:
    return element.join(part.rstrip(component) for part in text.split(element)).rstrip(element)
