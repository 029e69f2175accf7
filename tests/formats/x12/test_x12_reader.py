"""Tokenizer and envelope model: delimiters from the ISA, tolerated layouts, errors with positions,
control-count and control-number warnings (X12.5; SPEC §3.7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.formats.x12 import Delimiters, X12ParseError, parse_x12, tokenize

ISA = "ISA*00*          *00*          *ZZ*SENDER         *ZZ*RECEIVER       *240101*1200*^*00501*000000001*0*P*:~"
BODY = "GS*HB*S*R*20240101*1200*7*X*005010X279A1~ST*271*0001*005010X279A1~BHT*0022*11*T1*20240101*1200~SE*3*0001~GE*1*7~"
GOOD = ISA + BODY + "IEA*1*000000001~"


def _warnings(text: str) -> list[str]:
    return parse_x12(text).all_warnings()


def test_reads_delimiters_from_the_isa() -> None:
    text = GOOD.replace("*", "|").replace("~", "\n").replace("|^|", "|!|").replace("|:\n", "|>\n")
    document = parse_x12(text)
    assert document.interchanges[0].delimiters == Delimiters("|", ">", "!", "\n")
    transaction = next(document.transactions())
    assert (transaction.code, transaction.control_number, transaction.guide) == (
        "271",
        "0001",
        "005010X279A1",
    )
    assert document.all_warnings() == []


@pytest.mark.parametrize("newline", ["\n", "\r", "\r\n"])
def test_line_breaks_between_segments_and_trailing_whitespace(newline: str) -> None:
    document = parse_x12(GOOD.replace("~", "~" + newline) + "  \n\n")
    assert [s.id for s in document.segments()] == ["ISA", "GS", "ST", "BHT", "SE", "GE", "IEA"]
    assert document.all_warnings() == []


def test_bom_and_short_isa_fields() -> None:
    short = "ISA*00* *00* *ZZ*SENDER *ZZ*RECEIVER\n*240101*1200*^*00501*000000001*0*P*:~"
    document = parse_x12(("\ufeff" + short + BODY + "IEA*1*000000001~").encode())
    isa = document.interchanges[0].isa
    assert isa.element(8) == "RECEIVER" and isa.element(16) == ":"
    assert document.interchanges[0].control_number == "000000001"
    assert document.all_warnings() == []


def test_004010_has_no_repetition_separator() -> None:
    document = parse_x12(GOOD.replace("*^*00501*", "*U*00401*").replace("EB", "EB"))
    assert document.interchanges[0].delimiters.repetition is None


@pytest.mark.parametrize(
    ("text", "message", "segment"),
    [
        ("", "empty input", None),
        ("GS*HB*S*R~", "does not start with an ISA", 0),
        ("ISA*00*00~", "found only", 0),
        ("ISA*00*          *00*          *ZZ*A*ZZ*B*240101*1200*^*00501*1*0*P*", "ends before ISA16", 0),
        (
            "ISA*00*          *00*          *ZZ*A*ZZ*B*240101*1200*^*00501*1*0*P*:X",
            "no segment terminator",
            0,
        ),
        ("ISA*00*          *00*          *ZZ*A*ZZ*B*240101*1200*^*00501*1*0*P*A~", "component separator", 0),
        (ISA + "GS*HB~st*271~", "bad segment identifier 'st'", 2),
        (ISA + "GS*HB~~*271~", "bad segment identifier ''", 2),
    ],
)
def test_malformed_input_raises_with_a_position(text: str, message: str, segment: int | None) -> None:
    with pytest.raises(X12ParseError, match=message) as info:
        parse_x12(text)
    assert info.value.segment == segment
    assert info.value.offset is not None
    assert "byte offset" in str(info.value)


def test_byte_offset_counts_utf8_bytes() -> None:
    with pytest.raises(X12ParseError) as info:
        parse_x12(ISA + "NM1*IL*1*MÜLLER~bad~")
    assert info.value.offset == len((ISA + "NM1*IL*1*MÜLLER~").encode())
    assert info.value.segment == 2


def test_hostile_input_stays_linear() -> None:
    # A million separators in one segment, and a long run without a terminator, parse in one pass.
    huge = ISA + "GS*" + "*" * 1_000_000 + "~" + "ST*271*1" + "A" * 1_000_000
    segments = list(tokenize(huge))
    assert len(segments[1].elements) == 1_000_001
    assert segments[2].element(2).endswith("A")
    with pytest.raises(X12ParseError, match="found only"):
        parse_x12("ISA" + "-" + "x" * 2_000_000)


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        (GOOD.replace("SE*3*0001", "SE*4*0001"), "SE01 says 4 segments, found 3"),
        (GOOD.replace("SE*3*0001", "SE*3*0002"), "SE02 '0002' does not match ST02 '0001'"),
        (GOOD.replace("SE*3*0001", "SE*x*0001"), "SE01 'x' is not a count"),
        (GOOD.replace("GE*1*7", "GE*2*7"), "GE01 says 2 transaction sets, found 1"),
        (GOOD.replace("GE*1*7", "GE*1*8"), "GE02 '8' does not match GS06 '7'"),
        (GOOD.replace("IEA*1*", "IEA*3*"), "IEA01 says 3 functional groups, found 1"),
        (GOOD.replace("IEA*1*000000001", "IEA*1*000000002"), "IEA02 '000000002' does not match ISA13"),
        (ISA + BODY, "interchange 000000001 has no IEA trailer"),
        (GOOD.replace("GE*1*7~", ""), "functional group 7 has no GE trailer"),
        (GOOD.replace("SE*3*0001~", ""), "transaction set 271 0001 has no SE trailer"),
        (GOOD.replace("GS*HB*S*R*20240101*1200*7*X*005010X279A1~", ""), "outside any GS"),
    ],
)
def test_envelope_problems_are_warnings(text: str, warning: str) -> None:
    warnings = _warnings(text)
    assert any(warning in w for w in warnings), warnings
    assert next(parse_x12(text).transactions()).code == "271"


def test_several_interchanges_groups_and_sets() -> None:
    two_sets = BODY.replace("GE*1*7~", "ST*271*0002~BHT*0022*11*T2~SE*3*0002~GE*2*7~")
    second = ISA.replace("000000001", "000000002") + BODY + "IEA*1*000000002~"
    document = parse_x12(ISA + two_sets + "IEA*1*000000001~\n" + second)
    assert [ic.control_number for ic in document.interchanges] == ["000000001", "000000002"]
    assert [t.control_number for t in document.transactions()] == ["0001", "0002", "0001"]
    assert document.all_warnings() == []
    transaction = next(document.transactions())
    assert transaction.interchange is document.interchanges[0]
    assert transaction.envelope_warnings() == []


def test_ta1_is_read_but_is_not_a_transaction_set() -> None:
    document = parse_x12(ISA + "TA1*000000009*240101*1200*A*000~IEA*0*000000001~")
    assert [s.id for s in document.interchanges[0].other] == ["TA1"]
    assert list(document.transactions()) == []
    assert document.all_warnings() == []


def test_segments_after_iea_are_kept_with_a_warning() -> None:
    document = parse_x12(GOOD + "ST*271*0009~SE*2*0009~")
    assert [t.control_number for t in document.transactions()] == ["0001", "0009"]
    assert any("after IEA" in w for w in document.all_warnings())


def test_values_repetitions_and_components() -> None:
    text = ISA + "GS*HB~ST*271*1~EB*1**1^33^35*HM~STC*F2:88:QC*20050612~SE*4*1~GE*1*1~IEA*1*000000001~"
    transaction = next(parse_x12(text).transactions())
    eb, stc = transaction.segments[1], transaction.segments[2]
    assert eb.value(3) == "1" and eb.value(3, 2) == "33" and eb.value(3, 4) is None
    assert eb.value(2) is None and eb.value(9) is None
    assert stc.value(1) == "F2:88:QC" and stc.value(1, component=2) == "88"
    assert stc.value(1, component=5) is None
    assert eb.repetitions(3) == ["1", "33", "35"] and stc.components(1) == ["F2", "88", "QC"]


def test_package_exports_are_sorted_and_complete() -> None:
    import assay.formats.x12 as package

    public = {name for name in vars(package) if not name.startswith("_") and name != "annotations"}
    public -= {name for name, value in vars(package).items() if isinstance(value, type(package))}
    assert set(package.__all__) == public
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions, each sorted.
    kind = {True: 0, False: 1}
    assert package.__all__ == sorted(
        package.__all__, key=lambda n: (kind[n.isupper()] if n[0].isupper() else 2, n)
    )


@given(st.text(alphabet=st.sampled_from(list("ISAGEST*~:^|\n\r 0123456789AB\ufeff")), max_size=400))
def test_any_text_parses_or_raises_x12_parse_error(text: str) -> None:
    try:
        document = parse_x12(text)
    except X12ParseError as exc:
        assert exc.offset is not None
        return
    for transaction in document.transactions():
        assert transaction.loops is not None
        assert sorted(transaction.loops.all_positions()) == list(range(len(transaction.segments)))


@given(st.text(max_size=200))
def test_any_text_after_a_valid_header_parses_or_raises_x12_parse_error(tail: str) -> None:
    try:
        document = parse_x12(ISA + tail)
    except X12ParseError:
        return
    assert document.interchanges[0].isa.element(13) == "000000001"
