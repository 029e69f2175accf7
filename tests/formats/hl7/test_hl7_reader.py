"""Reading raw HL7v2 input: line ends, BOM, delimiters, batches, nulls, and clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import FIXTURES

from assay.formats.hl7 import Hl7Message, Hl7ParseError, parse_message, parse_messages

HL7 = FIXTURES / "hl7v2"

ADT_A04 = (
    "MSH|^~\\&|REG|HOSP|EHR|HOSP|20260301120000||ADT^A04^ADT_A01|CTRL-1|P|2.5.1\r"
    "EVN|A04|20260301120000\r"
    'PID|1||MRN123^^^HOSP^MR~999-99-9999^^^SSA^SS||DOE^JANE^Q||19800101|F|||1 Main St^^Town^ST^12345||""\r'
    "PV1|1|O|CLINIC^101^A\r"
    "ZPI|1|custom^value&sub\r"
)


def read(message: Hl7Message, path: str) -> str | None:
    value = message.read(path)
    assert value.found, path
    return value.value


def test_reads_fields_components_repetitions_and_subcomponents() -> None:
    message = parse_message(ADT_A04)
    assert read(message, "MSH.9") == "ADT^A04^ADT_A01"
    assert read(message, "MSH.9.1") == "ADT"
    assert read(message, "MSH-9-2") == "A04"
    assert read(message, "MSH.10") == "CTRL-1"
    assert read(message, "PID.3") == "MRN123^^^HOSP^MR"
    assert read(message, "PID.3[2].1") == "999-99-9999"
    assert read(message, "PID.5.1") == "DOE"
    assert read(message, "PID.5") == "DOE^JANE^Q"
    assert read(message, "ZPI.2.2.2") == "sub"
    assert read(message, "ZPI.2.2") == "value&sub"


def test_msh_numbering_follows_the_standard() -> None:
    message = parse_message(ADT_A04)
    assert read(message, "MSH.1") == "|"
    assert read(message, "MSH.2") == "^~\\&"
    assert read(message, "MSH.3") == "REG"
    assert not message.read("MSH.2.2").found


def test_explicit_null_is_present_and_empty_absent_is_absent() -> None:
    message = parse_message(ADT_A04)
    null = message.read("PID.13")
    assert null.found and null.value is None
    assert not message.read("PID.2").found  # `||`: not sent
    assert not message.read("PID.99").found
    assert not message.read("PID.3[3]").found
    assert not message.read("PID.5.9").found
    assert not message.read("OBX.1").found
    assert not message.read("PID[2].1").found


def test_primitive_field_is_its_own_first_component() -> None:
    message = parse_message(ADT_A04)
    assert read(message, "PID.8") == read(message, "PID.8.1") == read(message, "PID.8.1.1") == "F"
    assert not message.read("PID.8.2").found


def test_trailing_empty_components_are_dropped_when_rejoined() -> None:
    message = parse_message("MSH|^~\\&|A|B|C|D|20260101||ADT^A01|1|P|2.5\rPID|1||X^^^^||A&&^B^^")
    assert read(message, "PID.3") == "X"
    assert read(message, "PID.5") == "A^B"
    assert read(message, "PID.5.1") == "A"


@pytest.mark.parametrize("line_end", ["\r", "\n", "\r\n"])
def test_segment_ends_cr_lf_crlf_read_the_same(line_end: str) -> None:
    message = parse_message(ADT_A04.replace("\r", line_end) + line_end)
    assert message.segment_ids == ("MSH", "EVN", "PID", "PV1", "ZPI")
    assert read(message, "PV1.3.2") == "101"


def test_byte_order_mark_and_mllp_framing_are_skipped() -> None:
    for raw in ("\ufeff" + ADT_A04, b"\xef\xbb\xbf" + ADT_A04.encode(), "\x0b" + ADT_A04 + "\x1c\r"):
        assert read(parse_message(raw), "MSH.9.1") == "ADT"


def test_latin1_bytes_fall_back() -> None:
    message = parse_message(ADT_A04.replace("DOE", "MÜLLER").encode("latin-1"))
    assert read(message, "PID.5.1") == "MÜLLER"


def test_custom_delimiters_from_msh1_and_msh2() -> None:
    raw = "MSH!@*#%!SEND!FAC!RECV!FAC!20260101!!ORU@R01!C9!P!2.5\rPID!1!!ID1@@@AUTH*ID2!!SMITH@JOHN%JR!!"
    message = parse_message(raw)
    assert read(message, "MSH.1") == "!"
    assert read(message, "MSH.2") == "@*#%"
    assert message.message_type.value == "ORU^R01"
    assert read(message, "PID.3[2]") == "ID2"
    assert read(message, "PID.3.4") == "AUTH"
    assert read(message, "PID.5.2.2") == "JR"
    assert read(message, "PID.5") == "SMITH^JOHN&JR"  # re-joined with ^ and & (SPEC §3.3)


def test_escapes_decoded_with_the_message_escape_character() -> None:
    raw = "MSH|^~#&|A|B|C|D|20260101||ADT^A01|1|P|2.5\rNTE|1||A#T#E #S# #H#bold#N# \\T\\"
    assert read(parse_message(raw), "NTE.3") == "A&E ^ #H#bold#N# \\T\\"


def test_real_escapes_in_fixtures() -> None:
    adt = parse_message((HL7 / "fhir-converter/ADT-A04-01.hl7").read_bytes())
    assert read(adt, "PV1.14") == "NHS Provider-General (inc.A&E-this Hosp)"
    oru = parse_message(
        (
            HL7 / "cdc-trusted-intermediary/LA__003_LA_ORU_R01_NBS_obr_flatten_0_initial_message.hl7"
        ).read_bytes()
    )
    assert read(oru, "OBX[28].3.2") == "Body weight^at birth"
    orm = parse_message((HL7 / "hl7-dotnetcore/Sample-ORM.txt").read_bytes())
    assert read(orm, "NTE[2].3") == "some text\r\nsome text after new line\r\nissue Efferent-Health#81"
    assert read(orm, "NTE.3").startswith("some text\\.br\\some text after \\H\\new line\\N\\")


def test_batches_and_files_split_into_messages() -> None:
    for name, control_ids in [
        ("sample_batch.hl7", ["12334456778890"]),
        ("sample_batch1.hl7", ["12334456778890", "12334456778891"]),
        ("sample_batch2.hl7", ["12334456778890", "12334456778891"]),
        ("sample_file.hl7", ["12334456778890"]),
        ("sample_file1.hl7", ["12334456778890", "12334456778891", "12334456778890"]),
        ("sample_file2.hl7", ["12334456778890", "12334456778891"]),
    ]:
        messages = parse_messages((HL7 / "python-hl7" / name).read_bytes())
        assert [m.control_id.value for m in messages] == control_ids, name
        assert [m.position for m in messages] == list(range(1, len(control_ids) + 1))
        assert all(m.segment_ids[0] == "MSH" and "BTS" not in m.segment_ids for m in messages)
    with pytest.raises(Hl7ParseError, match="expected one message"):
        parse_message((HL7 / "python-hl7/sample_batch1.hl7").read_bytes())


def test_segment_occurrence_counts_across_the_message() -> None:
    message = parse_message((HL7 / "cdc-trusted-intermediary/Natus__002_Natus_ORU_R01_NBS.hl7").read_bytes())
    assert message.segments("OBX") == 110
    assert read(message, "OBX[110].3.1") == "92004-1"
    assert not message.read("OBX[111].1").found


def test_z_segments_and_non_ascii() -> None:
    z = parse_message((HL7 / "rethinkhealth/edge-z-segments.hl7").read_bytes())
    assert read(z, "ZVN.3.3") == "VALUE3"
    assert read(z, "ZPD.4") == "EXTENDED_FIELD_3"
    text = parse_message((HL7 / "rethinkhealth/edge-non-ascii.hl7").read_bytes())
    assert read(text, "PID.5.1") == "MÜLLER"
    assert read(text, "NK1.2.1") == "GARCÍA"


@pytest.mark.parametrize(
    ("raw", "reason", "segment"),
    [
        ("", "empty input", None),
        ("  \r\n\r\n", "empty input", None),
        ("PID|1||123", "before any message header", 1),
        ("MSH", "no field separator", 1),
        ("MSH|", "no encoding characters", 1),
        ("MSH||A|B", "no encoding characters", 1),
        ("MSH|^~\\&", "nothing after MSH-2", 1),
        ("MSH|^~\\&#XYZ|A", "more than 5", 1),
        ("MSH|^^\\&|A|B", "distinct", 1),
        ("MSHA^~\\&A", "distinct", 1),
        ("MSH|^~\\&|A\rPIDX|1", "not a segment ID", 2),
        ("MSH|^~\\&|A\rPV|1", "not a segment ID", 2),
        ("MSH|^~\\&|A\rpid|1", "not a segment ID", 2),
        ("BHS|^~\\&|A\rEVN|1", "before any message header", 2),
        ("BHS|^~\\&|A\rMSH|^~\\&|A\rBHS|^~\\&|B", "inside an open batch", 3),
        ("MSH|^~\\&|A\rFHS|^~\\&|A", "first segment", 2),
        ("FHS|^~\\&|A\rFTS|1", "no message header", None),
        ("just some text", "not a segment ID", 1),
    ],
)
def test_malformed_input_is_a_clear_parse_error(raw: str, reason: str, segment: int | None) -> None:
    with pytest.raises(Hl7ParseError) as caught:
        parse_messages(raw)
    assert reason in str(caught.value)
    assert caught.value.segment == segment
    if segment is not None:
        assert f"segment {segment}" in str(caught.value)


@given(st.text(alphabet=st.sampled_from("MSHPIDBTF|^~\\&\r\n 1\ufeff\x0b"), max_size=60))
def test_only_our_error_escapes_on_any_input(raw: str) -> None:
    try:
        messages = parse_messages(raw)
    except Hl7ParseError:
        return
    for message in messages:
        for path in ("MSH.1", "MSH.2", "MSH.9", "MSH.9.1.1", "PID.3[2].1", "MSH[2].3"):
            message.read(path)


@given(st.text(max_size=80))
def test_any_text_after_a_valid_header_parses_or_fails_clearly(tail: str) -> None:
    try:
        messages = parse_messages("MSH|^~\\&|" + tail)
    except Hl7ParseError:
        return
    for message in messages:
        assert message.read("MSH.3").found in (True, False)
        message.read("MSH.9.2")


def test_parse_header_agrees_with_a_full_parse_on_every_fixture() -> None:
    """`parse_header` (the ACK's reader) refuses what `parse_messages` refuses for its segment
    checks, and reads the same header and message count from everything that parses."""
    from tests.conftest import FIXTURES

    from assay.formats.hl7 import Hl7ParseError, parse_header, parse_messages

    for path in sorted((FIXTURES / "hl7v2").rglob("*.hl7")):
        raw = path.read_bytes()
        try:
            messages = parse_messages(raw)
        except Hl7ParseError:
            continue
        header = parse_header(raw)
        assert header.count == len(messages), path
        assert header.message.control_id == messages[0].control_id, path
        assert header.message.read("MSH.6") == messages[0].read("MSH.6"), path
