"""Writer and builder: correct control counts, chosen delimiters, round trip through the parser."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import FIXTURES

from assay.formats.x12 import (
    Delimiters,
    X12Path,
    X12Segment,
    build_interchange,
    build_segment,
    build_transaction,
    parse_x12,
    write_x12,
)

WHEN = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


def _eligibility_response(control: str = "0001") -> object:
    return build_transaction(
        "271",
        [
            ("BHT", "0022", "11", "T1", "20260102", "0304"),
            ("HL", "1", "", "20", "1"), ("NM1", "PR", "2", "ACME HEALTH", "", "", "", "", "PI", "P1"),
            ("HL", "2", "1", "21", "1"), ("NM1", "1P", "2", "CLINIC", "", "", "", "", "XX", "1234567893"),
            ("HL", "3", "2", "22", "0"), ("TRN", "2", "TRACE-1", "9ASSAY"),
            ("NM1", "IL", "1", "DOE", "JANE", "", "", "", "MI", "M100"),
            ("EB", "1", "IND", ["30", "1", "98"], "HM", "GOLD"),
            ("EB", "B", "IND", "98", "", "", "27", "25.00", "", "", "", "Y"),
        ],
        control_number=control,
        guide="005010X279A1",
    )  # fmt: skip


def test_builder_wraps_counts_and_control_numbers() -> None:
    interchange = build_interchange(
        [_eligibility_response("0001"), _eligibility_response("0002")],
        sender_id="ASSAYCH", receiver_id="AGENT", control_number=42, group_control_number=7, when=WHEN,
    )  # fmt: skip
    text = write_x12(interchange)
    assert text.startswith(
        "ISA*00*          *00*          *ZZ*ASSAYCH        *ZZ*AGENT          *260102*0304*^*00501*000000042*0*P*:~"
        "GS*HB*ASSAYCH*AGENT*20260102*0304*7*X*005010X279A1~ST*271*0001*005010X279A1~"
    )
    assert "SE*12*0001~" in text and "SE*12*0002~" in text
    assert text.endswith("GE*2*7~IEA*1*000000042~")
    document = parse_x12(text)
    assert document.all_warnings() == []
    first = next(document.transactions())
    assert X12Path.parse("2100C/NM1[IL]09").read(first) == "M100"
    assert X12Path.parse("2110C/EB[1]03~3").read(first) == "98"
    assert X12Path.parse("EB[B]11").read(first) == "Y"


def test_one_group_per_functional_id() -> None:
    claim_status = build_transaction("277", [("BHT", "0010", "08")], guide="005010X212")
    interchange = build_interchange(
        [_eligibility_response(), claim_status], sender_id="A", receiver_id="B", when=WHEN
    )
    document = parse_x12(write_x12(interchange))
    assert [g.gs.element(1) for g in document.interchanges[0].groups if g.gs] == ["HB", "HN"]
    assert [g.gs.element(6) for g in document.interchanges[0].groups if g.gs] == ["1", "2"]
    assert document.all_warnings() == []


def test_writer_recomputes_wrong_counts_and_adds_missing_trailers() -> None:
    broken = (FIXTURES / "x12/pyx12/837miss.source.x12").read_text()
    assert parse_x12(broken).all_warnings()
    assert parse_x12(write_x12(parse_x12(broken))).all_warnings() == []
    wrong = (FIXTURES / "x12/imsweb/x270_271/x271.txt").read_text()
    assert parse_x12(write_x12(parse_x12(wrong))).all_warnings() == []


def test_other_delimiters_and_line_breaks() -> None:
    interchange = build_interchange([_eligibility_response()], sender_id="A", receiver_id="B", when=WHEN)
    target = Delimiters(element="|", component=">", repetition="!", segment="\n")
    text = write_x12(interchange, target)
    assert "EB|1|IND|30!1!98|HM|GOLD\n" in text
    assert parse_x12(text).interchanges[0].delimiters == target
    readable = write_x12(interchange, line_break="\n")
    assert readable.count("~\n") == len(list(parse_x12(readable).segments()))


def test_refuses_values_that_contain_a_delimiter() -> None:
    with pytest.raises(ValueError, match="contains the delimiter"):
        build_segment("NM1", "IL", "1", "O*BRIEN")
    segment = build_segment("NM1", "IL", "1", "A|B")
    with pytest.raises(ValueError, match="contains the delimiter"):
        write_x12([segment], Delimiters(element="|"))
    with pytest.raises(ValueError, match="distinct"):
        write_x12([segment], Delimiters(element="*", component="*"))
    with pytest.raises(ValueError, match="repetition separator"):
        build_segment("EB", ["1", "2"], delimiters=Delimiters(repetition=None))


def test_builder_values() -> None:
    segment = build_segment("SV1", ("HC", "99213", "", ""), 150, None, "UN", ["A", ("B", "C")])
    assert str(segment) == "SV1*HC:99213*150**UN*A^B:C"
    assert write_x12([segment]) == "SV1*HC:99213*150**UN*A^B:C~"
    assert write_x12([X12Segment("EB", ("1", "", "", ""))]) == "EB*1~"


_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_delimiters = st.lists(st.sampled_from(_PUNCTUATION), min_size=4, max_size=4, unique=True).flatmap(
    lambda chars: st.builds(
        Delimiters,
        element=st.just(chars[0]),
        component=st.just(chars[1]),
        repetition=st.just(chars[2]),
        segment=st.sampled_from([chars[3], "\n", "\r"]),
    )
)
_text = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ", max_size=8)
_element = st.one_of(
    _text,
    st.tuples(_text, _text),
    st.lists(st.one_of(_text, st.tuples(_text, _text)), min_size=1, max_size=3),
)
_segment = st.tuples(
    st.from_regex(r"[A-Z][A-Z0-9]{1,2}", fullmatch=True).filter(
        lambda s: s not in {"ISA", "IEA", "GS", "GE", "ST", "SE"}
    ),
    st.lists(_element, max_size=6),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_segment, min_size=1, max_size=12), st.lists(_segment, max_size=5), _delimiters)
def test_round_trip_with_random_delimiters(first, second, delimiters) -> None:
    sets = [
        build_transaction(
            "271", [(seg_id, *elements) for seg_id, elements in body], control_number=f"{i:04d}"
        )
        for i, body in enumerate([first, second], 1)
    ]
    interchange = build_interchange(sets, sender_id="S", receiver_id="R", when=WHEN)
    text = write_x12(interchange, delimiters)
    document = parse_x12(text)
    assert document.all_warnings() == []
    assert document.interchanges[0].delimiters == delimiters
    parsed = list(document.transactions())
    assert [t.control_number for t in parsed] == ["0001", "0002"]
    for built, read in zip(sets, parsed, strict=True):
        assert [_canonical(s) for s in read.segments] == [_canonical(s) for s in built.segments]
        assert read.se is not None and int(read.se.element(1)) == len(read.segments)


def _canonical(segment: X12Segment) -> tuple:
    """Delimiter-free content with trailing empties dropped (X12 suppresses them)."""
    elements = [tuple(_trim([tuple(_trim(list(rep))) for rep in element])) for element in segment.structure()]
    return (segment.id, *_trim([e if e not in ((), ((),)) else () for e in elements]))


def _trim(values: list) -> list:
    while values and values[-1] in ("", (), ((),)):
        values.pop()
    return values


def test_sets_outside_a_group_are_written_inside_one() -> None:
    text = (
        "ISA*00*          *00*          *ZZ*SENDER         *ZZ*RECEIVER       *240101*1200*^*00501*000000001*0*P*:~"
        "ST*271*0001*005010X279A1~BHT*0022*11~SE*3*0001~IEA*1*000000001~"
    )
    document = parse_x12(text)
    assert any("outside any GS" in w for w in document.all_warnings())
    written = write_x12(document)
    assert "~GS*HB*SENDER*RECEIVER*20240101*1200*1*X*005010X279A1~ST*271" in written
    assert parse_x12(written).all_warnings() == []
