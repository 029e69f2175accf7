"""The clearinghouse's envelope and protocol errors: TA1 for the interchange, 999 naming segment
and element, fresh control numbers and swapped parties; and nothing it writes fails to read back."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.formats.x12 import parse_x12
from assay.sandboxes.payer import parse_payer
from assay.sandboxes.x12 import respond

from ..payer.samples import PAYER
from .reading import every, read, read_back, transactions
from .requests import NOW, claim_status_276, eligibility_270, interchange, subscriber_270

DEFINITION = parse_payer(PAYER)
GOOD_270 = interchange("270", eligibility_270(subscriber_270("W123456789", trace="T1")))


def _respond(body: str | bytes, endpoint: str = "270", control: int = 77) -> tuple[str, str, tuple[str, ...]]:
    reply = respond(endpoint, body, DEFINITION, control_number=control, now=NOW)
    read_back(reply.text)
    return reply.kind, reply.text, reply.problems


def test_parties_are_swapped_and_control_numbers_fresh() -> None:
    kind, text, _ = _respond(GOOD_270, control=123456)
    interchange_ = parse_x12(text).interchanges[0]
    isa, gs = interchange_.isa, interchange_.groups[0].gs
    assert kind == "271" and gs is not None
    assert (isa.element(5), isa.element(6).strip(), isa.element(7), isa.element(8).strip()) == (
        "ZZ",
        "ACME01",
        "ZZ",
        "AGENT01",
    )
    assert isa.element(13) == "000123456" and isa.element(15) == "T" and isa.element(14) == "0"
    assert (gs.element(2), gs.element(3), gs.element(6)) == ("ACMEAPP", "AGENTAPP", "123456")
    assert interchange_.other == []  # no TA1 unless ISA14 asks for one
    _, again, _ = _respond(GOOD_270, control=123457)
    assert parse_x12(again).interchanges[0].control_number == "000123457"


def test_ta1_accepted_when_the_request_asks_for_it() -> None:
    asking = GOOD_270.replace("*000000905*0*T*", "*000000905*1*T*", 1)
    _, text, _ = _respond(asking)
    [ta1] = parse_x12(text).interchanges[0].other
    assert str(ta1) == "TA1*000000905*260430*0915*A*000"


def _ta1(text: str) -> str:
    [ta1] = parse_x12(text).interchanges[0].other
    return str(ta1)


def test_isa_with_wrong_element_widths_is_refused_with_ta1() -> None:
    narrow = GOOD_270.replace("*ZZ*AGENT01        *", "*ZZ*AGENT01*", 1)
    kind, text, problems = _respond(narrow)
    assert kind == "TA1" and _ta1(text) == "TA1*000000905*260430*0915*R*006"
    assert problems == ("TA1 006: ISA06 is 7 characters wide, expected exactly 15",)
    assert list(parse_x12(text).transactions()) == []
    kind, text, _ = _respond(GOOD_270.replace("*00501*", "*00401*", 1))
    assert _ta1(text).endswith("*R*017")


def test_truncated_interchange_is_refused_with_ta1() -> None:
    kind, text, problems = _respond(GOOD_270[: GOOD_270.index("SE*")])
    assert kind == "TA1" and _ta1(text).endswith("*R*023") and "IEA" in problems[0]
    kind, text, _ = _respond(GOOD_270[:60])
    assert kind == "TA1" and _ta1(text) == "TA1*000000000*260501*1230*R*023"


def test_not_x12_and_bad_trailers_are_refused_with_ta1() -> None:
    for garbage, code in [(b"", "022"), (b"\x00\xff hello", "022"), ('{"json": 1}', "022")]:
        kind, text, _ = _respond(garbage)
        assert kind == "TA1" and _ta1(text).endswith(f"*R*{code}"), garbage
    assert _ta1(_respond(GOOD_270.replace("IEA*1*000000905", "IEA*1*000000906"))[1]).endswith("*R*001")
    assert _ta1(_respond(GOOD_270.replace("IEA*1*", "IEA*2*"))[1]).endswith("*R*021")
    assert _ta1(_respond(GOOD_270 + "NM1*XX~")[1]).endswith("*R*024")


def test_a_276_posted_to_the_270_endpoint_is_a_999() -> None:
    kind, text, problems = _respond(
        interchange("276", claim_status_276(("W123456789", "PCN001", "1"))), "270"
    )
    [ack] = transactions(text)
    assert kind == "999" and ack.guide == "005010X231A1"
    assert [str(s) for s in ack.segments[1:-1]] == [
        "AK1*HR*1*005010X212", "AK2*276*0001*005010X212", "IK3*ST*1**8", "IK4*1*143*7*276", "IK5*R*1*5",
        "AK9*R*1*1*0",
    ]  # fmt: skip
    assert problems[0] == "276 0001: ST01 '276': this endpoint takes 270"


def _ack_lines(text: str) -> list[str]:
    [ack] = [t for t in transactions(text) if t.code == "999"]
    return [str(s) for s in ack.segments if s.id in ("IK3", "IK4", "IK5", "AK9")]


def test_segment_and_element_errors_are_named_by_ik3_and_ik4() -> None:
    body = eligibility_270(subscriber_270("W123456789", trace="T1"))
    cases = {
        "bad date": (
            ("BHT", "0022", "13", "R", "20261340", "0915"),
            ["IK3*BHT*2**8", "IK4*4*373*8*20261340"],
        ),
        "wrong purpose": (("BHT", "0022", "99", "R", "20260430"), ["IK3*BHT*2**8", "IK4*2*353*7*99"]),
    }
    for name, (bht, expected) in cases.items():
        lines = _ack_lines(_respond(interchange("270", [bht, *body[1:]]))[1])
        assert lines[: len(expected)] == expected, name
        assert lines[-2:] == ["IK5*R*5", "AK9*R*1*1*0"], name
    no_id = [
        ("NM1", "IL", "1", "DOE", "", "", "", "", "MI") if row[:2] == ("NM1", "IL") else row for row in body
    ]
    assert _ack_lines(_respond(interchange("270", no_id))[1])[:2] == ["IK3*NM1*9*2100C*8", "IK4*9*67*2"]
    too_long = [(*row, "X", "Y", "Z") if row[0] == "TRN" else row for row in body]
    assert _ack_lines(_respond(interchange("270", too_long))[1])[:2] == ["IK3*TRN*8*2000C*8", "IK4*5**3"]
    unexpected = [*body[:-1], ("EB", "1"), body[-1]]
    assert _ack_lines(_respond(interchange("270", unexpected))[1])[0] == "IK3*EB*10*2100C*2"
    level = [
        ("HL", *row[1:3], "99", *row[4:]) if row[:1] == ("HL",) and row[3] == "22" else row for row in body
    ]
    assert _ack_lines(_respond(interchange("270", level))[1])[:2] == ["IK3*HL*7**8", "IK4*3*735*7*99"]
    no_name = [row for row in body if row[:2] != ("NM1", "IL")]
    assert _ack_lines(_respond(interchange("270", no_name))[1])[0] == "IK3*NM1*8*2100C*3"


def test_a_malformed_segment_id_is_an_ik3_not_a_refusal() -> None:
    broken = GOOD_270.replace("EQ*30~", "E@*30~")
    kind, text, problems = _respond(broken)
    assert kind == "999" and _ack_lines(text)[0] == "IK3*ZZZ*10*2100C*1" and "'E@'" in problems[0]


def test_accepted_and_rejected_sets_in_one_group() -> None:
    good = eligibility_270(subscriber_270("W123456789", trace="OK"))
    bad = [("BHT", "0022", "13", "R", "2026"), *good[1:]]
    kind, text, _ = _respond(interchange("270", good, bad))
    assert kind == "271"
    by_code = {t.code: t for t in transactions(text)}
    assert every(by_code["999"], "AK901") == ["P"]
    assert every(by_code["999"], "IK501") == ["A", "R"]
    assert read(by_code["271"], "2000C/TRN02") == "OK"


def test_group_trailer_problems_reject_the_group() -> None:
    kind, text, _ = _respond(GOOD_270.replace("GE*1*1~", "GE*1*2~"))
    assert kind == "999" and _ack_lines(text)[-1] == "AK9*R*1*1*0*4"
    kind, text, _ = _respond(GOOD_270.replace("SE*11*0001~", "SE*12*0001~"))
    assert kind == "999" and _ack_lines(text) == ["IK5*R*4", "AK9*R*1*1*0"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_mutation_of_a_good_request_gets_a_readable_x12_answer(data: st.DataObject) -> None:
    """Hypothesis: cut, splice or corrupt a valid 270 anywhere; the reply always reads back."""
    text = GOOD_270
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    filler = data.draw(st.text(alphabet="*~:^ABZ019\n\x00é", max_size=12))
    mutated = text[:start] + filler + text[end:]
    endpoint = data.draw(st.sampled_from(["270", "276", "278"]))
    reply = respond(endpoint, mutated.encode("utf-8"), DEFINITION, control_number=3, now=NOW)
    read_back(reply.text)
    assert reply.kind in ("271", "999", "TA1") if endpoint == "270" else reply.kind in ("999", "TA1")
