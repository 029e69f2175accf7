"""270 → 271 (X279A1) from the payer definition: SPEC §5.3's content, read back loop by loop."""

from __future__ import annotations

from typing import Any

import pytest

from assay.formats.x12 import X12TransactionSet, segments_in
from assay.sandboxes.payer import parse_payer
from assay.sandboxes.x12 import respond

from ..payer.samples import PAYER
from .reading import every, read, transactions
from .requests import NOW, dependent_270, eligibility_270, interchange, subscriber_270

DEFINITION = parse_payer(PAYER)


def _answer(*subscribers: list[Any]) -> X12TransactionSet:
    reply = respond(
        "270", interchange("270", eligibility_270(*subscribers)), DEFINITION, control_number=41, now=NOW
    )
    assert reply.kind == "271" and reply.answered == 1, reply
    [transaction] = transactions(reply.text)
    return transaction


def _subscriber_loops(transaction: X12TransactionSet) -> list[list[str]]:
    """Each 2000C as its segments' text, in order."""
    return [
        [str(transaction.segments[p]) for p in loop.all_positions()]
        for loop in transaction.loops.find("2000C")
    ]


def test_active_subscriber_gets_every_benefit_with_amounts() -> None:
    reply = _answer(subscriber_270("w123456789", trace="T-1", last="DOE", first="jane", birth="19800412"))
    assert reply.code == "271" and reply.guide == "005010X279A1"
    assert read(reply, "BHT02") == "11" and read(reply, "BHT03") == "REF001"
    assert read(reply, "2100A/NM1[PR]09") == "ACME01"
    assert read(reply, "2000C/TRN02") == "T-1" and read(reply, "2000C/TRN01") == "2"
    assert read(reply, "2100C/NM1[IL]09") == "W123456789" and read(reply, "2100C/REF[6P]02") == "GRP100"
    assert read(reply, "2110C/EB[1]03") == "30" and read(reply, "2110C/EB[1]05") == "Gold PPO"
    assert read(reply, "2110C/DTP[291]03") == "20260101-20261231"
    assert every(reply, "2110C/EB[C]06") == ["23", "29"] and every(reply, "2110C/EB[C]07") == ["1500", "600"]
    assert every(reply, "2110C/EB[G]07") == ["5000", "4200"]
    assert read(reply, "EB[B]03") == "98" and read(reply, "EB[B]07") == "25" and read(reply, "EB[B]12") == "Y"
    assert every(reply, "EB[A]08") == ["0.2", "0.3"]
    assert read(reply, "EB[F]09") == "VS" and read(reply, "EB[F]10") == "20"
    assert read(reply, "EB[1][#3]03") == "MH" and read(reply, "EB[1][#3]11") == "Y"
    assert read(reply, "EB[I]03") == "UC"
    assert read(reply, "2110C/MSG01") == "Specialist visits need a referral"
    # MSG sits in the 2110C loop of the benefit it explains
    professional = [
        loop for loop in reply.loops.find("2110C") if reply.segments[loop.positions[0]].element(3) == "98"
    ]
    assert [reply.segments[p].id for p in professional[0].positions] == ["EB", "DTP", "MSG"]


def test_several_subscribers_and_a_dependent_in_one_inquiry() -> None:
    reply = _answer(
        subscriber_270("W123456789", trace="A", service_types=["98", "UC"]),
        subscriber_270("W123456789", trace="B", dependents=dependent_270(trace="C", last="doe", first="TIM")),
        subscriber_270("X987", trace="D", date="20260301"),
        subscriber_270("NOPE", trace="E"),
        subscriber_270("W123456789", trace="F", last="Smith"),
        subscriber_270("W123456789", trace="G", birth="19800413"),
        subscriber_270("W123456789", trace="H", birth="19801340"),
        subscriber_270("W123456789", trace="I", dependents=dependent_270(trace="J", last="Doe", first="Tom")),
    )
    loops = reply.loops.find("2000C")
    assert len(loops) == 8
    traces = [s.element(2) for s in segments_in(reply, ("2000C",)) if s.id == "TRN"]
    assert traces == ["A", "C", "D", "E", "F", "G", "H", "J"]
    first, family, lapsed, unknown, renamed, born_later, bad_date, stranger = _subscriber_loops(reply)
    assert "EB*1*IND*30**Gold PPO" in first and "EB*I*IND*UC**Gold PPO" in first
    assert not any(line.startswith("EB*1*IND*MH") for line in first)  # only the types asked (+ plan)
    assert "NM1*03*1*Doe*Tim" in family and "EB*B*IND*30****10" in family and "TRN*2*C*9AGENT0001" in family
    assert "EB*6*IND*30" in lapsed and "DTP*291*RD8*20200101-20241231" in lapsed
    assert unknown[-1] == "AAA*Y**75*C" and "NM1*IL*1******MI*NOPE" in unknown
    assert renamed[-1] == "AAA*N**73*C"
    assert born_later[-1] == "AAA*N**71*C"
    assert bad_date[-1] == "AAA*N**58*C"
    assert stranger[-1] == "AAA*N**73*C" and stranger[0].startswith("HL")
    assert not any(line.startswith("EB") for line in unknown + renamed + born_later + bad_date + stranger)


def test_coverage_is_judged_on_the_inquiry_date() -> None:
    ended = _answer(subscriber_270("W123456789", trace="T", date="20270102"))
    assert read(ended, "2110C/EB01") == "6"
    assert every(ended, "EB01") == ["6"]


@pytest.mark.parametrize("asked", [["30"], ["98", "30"]])
def test_plan_coverage_asks_for_everything(asked: list[str]) -> None:
    reply = _answer(subscriber_270("W123456789", trace="T", service_types=asked))
    assert {value for value in every(reply, "EB[1]03")} == {"30", "98", "MH"}


def test_a_member_without_benefits_still_has_plan_coverage() -> None:
    bare = parse_payer({"payer": {"id": "P"}, "members": [{"member_id": "M", "first_name": "A", "last_name": "B",
                                                           "birth_date": "2000-01-01"}]})  # fmt: skip
    reply = respond("270", interchange("270", eligibility_270(subscriber_270("M", trace="T"))), bare,
                    control_number=1, now=NOW)  # fmt: skip
    [transaction] = transactions(reply.text)
    assert every(transaction, "EB01") == ["1"] and read(transaction, "2100A/NM1[PR]03") == "P"
