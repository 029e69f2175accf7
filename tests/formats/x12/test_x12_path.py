"""`X12Path` grammar (SPEC §3.7): the spec's examples, alias spellings, errors, round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import FIXTURES

from assay.formats.x12 import X12Filter, X12Path, X12PathError, parse_x12

SUBSCRIBER_271 = FIXTURES / "x12/linuxforhealth/271_005010X279A1/subscriber-health-benefit-check.271"


@pytest.fixture(scope="module")
def eligibility():
    return next(parse_x12(SUBSCRIBER_271.read_bytes()).transactions())


@pytest.mark.parametrize(
    ("text", "loops", "segment", "filters", "element", "repetition", "component"),
    [
        ("BHT03", (), "BHT", (), 3, None, None),
        ("2100C/NM1[IL]09", ("2100C",), "NM1", (X12Filter("IL"),), 9, None, None),
        ("2110C/EB[1]03", ("2110C",), "EB", (X12Filter("1"),), 3, None, None),
        ("EB[#2]01", (), "EB", (X12Filter(ordinal=2),), 1, None, None),
        ("2110C/EB[1][#2]03", ("2110C",), "EB", (X12Filter("1"), X12Filter(ordinal=2)), 3, None, None),
        ("STC01-1", (), "STC", (), 1, None, 1),
        ("2000E/HCR01", ("2000E",), "HCR", (), 1, None, None),
        ("EB03~2", (), "EB", (), 3, 2, None),
        ("2000C/2100C/NM1[IL]09", ("2000C", "2100C"), "NM1", (X12Filter("IL"),), 9, None, None),
        ("N301", (), "N3", (), 1, None, None),
        ("SV1[HC:99213]01~1-2", (), "SV1", (X12Filter("HC:99213"),), 1, 1, 2),
        ("2010EA/NM1[71]03", ("2010EA",), "NM1", (X12Filter("71"),), 3, None, None),
    ],
)
def test_spec_examples_parse(text, loops, segment, filters, element, repetition, component) -> None:
    path = X12Path.parse(text)
    assert path == X12Path(loops, segment, filters, element, repetition, component)
    assert str(path) == text


@pytest.mark.parametrize("spelling", ["EB01", "EB*01", "EB-01", "EB.01", "EB*1", "EB.1", " EB01 "])
def test_alias_spellings_of_eb01(spelling: str) -> None:
    assert X12Path.parse(spelling) == X12Path.parse("EB01")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "expected SEG"),
        ("EB", "expected SEG"),
        ("EB1", "expected SEG"),
        ("eb01", "expected SEG"),
        ("EB00", "start at 01"),
        ("EB01~0", "repetition numbers start at 1"),
        ("EB01-0", "component numbers start at 1"),
        ("EB[#0]01", "positive number"),
        ("EB[#x]01", "positive number"),
        ("EB[]01", "empty filter"),
        ("EB[1", "expected SEG"),
        ("21C/EB01", "loop '21C'"),
        ("/EB01", "loop ''"),
        ("EB01-1-2", "expected SEG"),
    ],
)
def test_bad_paths_raise_a_clear_error(text: str, reason: str) -> None:
    with pytest.raises(X12PathError, match=reason) as info:
        X12Path.parse(text)
    assert repr(text.strip()) in str(info.value)


def test_non_string_path_is_refused() -> None:
    with pytest.raises(X12PathError, match="must be a string"):
        X12Path.parse(12)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("BHT03", "10001234"),
        ("2100C/NM1[IL]09", "123456789"),
        ("2000C/2100C/NM1[IL]09", "123456789"),
        ("2110C/EB[1]03", "30"),
        ("EB[#2]01", "L"),
        ("2110C/EB[1][#2]03", "1"),
        ("EB[1][#2]03~2", "33"),
        ("EB[B]07", "10.00"),
        ("EB[B][#2]07", "30.00"),
        ("2120C/NM1[P3]03", "JONES"),
        ("2110C/LS01", "2120"),
        ("2000C/TRN02", "93175-012547"),
        ("2100B/NM1[1P]03", "BONE AND JOIN CLINIC"),
        ("EB[#9]01", None),
        ("2100C/NM1[PR]09", None),
        ("2000D/NM103", None),
        ("BHT99", None),
        ("EB02", None),
        ("EB03~9", None),
        ("SE01", "22"),
    ],
)
def test_reads_a_real_271(eligibility, text: str, value: str | None) -> None:
    assert X12Path.parse(text).read(eligibility) == value


_loops = st.lists(st.from_regex(r"[0-9]{4}[A-Z]{0,2}", fullmatch=True), max_size=3)
_segments = st.from_regex(r"[A-Z][A-Z0-9]{1,2}", fullmatch=True)
_filters = st.lists(
    st.one_of(
        st.builds(
            X12Filter,
            qualifier=st.from_regex(r"[A-Z0-9:][A-Z0-9: ]{0,5}", fullmatch=True).map(str.strip).filter(bool),
        ),
        st.builds(X12Filter, ordinal=st.integers(1, 99)),
    ),
    max_size=3,
)
_optional = st.none() | st.integers(1, 30)


@given(_loops, _segments, _filters, st.integers(1, 99), _optional, _optional)
def test_round_trip(loops, segment, filters, element, repetition, component) -> None:
    path = X12Path(tuple(loops), segment, tuple(filters), element, repetition, component)
    assert X12Path.parse(str(path)) == path


@given(_segments, st.integers(1, 99), st.sampled_from(["*", "-", "."]), st.booleans())
def test_separator_spellings(segment: str, element: int, separator: str, padded: bool) -> None:
    number = f"{element:02d}" if padded else str(element)
    assert X12Path.parse(f"{segment}{separator}{number}") == X12Path((), segment, (), element)
