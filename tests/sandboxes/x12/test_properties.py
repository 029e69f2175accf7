"""Hypothesis over payer definitions: whatever the payer and the inquiry, the reply reads back
loop by loop, each subscriber gets either an AAA or benefits, and every 278 decision is the
authorization engine's."""

from __future__ import annotations

from datetime import date
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.sandboxes.payer import HCR_ACTIONS, decide_authorization, parse_payer
from assay.sandboxes.x12 import respond

from .reading import every, transactions
from .requests import NOW, eligibility_270, interchange, review_278, subscriber_270

_CODES = st.sampled_from(["30", "98", "MH", "UC", "AL", "33"])
_AMOUNT = st.one_of(st.none(), st.integers(0, 5000), st.decimals(0, 500, places=2).map(str))
_BENEFIT = st.fixed_dictionaries(
    {"service_type": _CODES, "coverage": st.sampled_from(["active", "inactive", "not_covered"])},
    optional={
        "copay": _AMOUNT, "coinsurance": st.decimals(0, 1, places=2).map(str), "deductible": _AMOUNT,
        "deductible_remaining": _AMOUNT, "out_of_pocket": _AMOUNT, "auth_required": st.booleans(),
        "in_network": st.booleans(), "visit_limit": st.integers(0, 60),
        "message": st.text("ABCDEFGH abc.,-", min_size=1, max_size=30).filter(str.strip),
    },
)  # fmt: skip
_DAY = st.dates(date(1940, 1, 1), date(2030, 12, 31)).map(date.isoformat)


@st.composite
def _payers(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 4))
    members = []
    for n in range(count):
        member: dict[str, Any] = {
            "member_id": f"M{n}", "first_name": draw(st.sampled_from(["Ann", "Bo", "Cy"])),
            "last_name": draw(st.sampled_from(["Lee", "Diaz"])), "birth_date": draw(_DAY),
            "benefits": draw(st.lists(_BENEFIT, max_size=5)),
        }  # fmt: skip
        if draw(st.booleans()):
            member["coverage"] = {
                "start": "2026-01-01",
                "end": draw(st.sampled_from(["2026-12-31", "2026-02-01"])),
            }
        members.append(member)
    rules = draw(
        st.lists(
            st.fixed_dictionaries(
                {"determination": st.sampled_from(list(HCR_ACTIONS)), "procedure_code": st.sampled_from(["1", "2", "3"])},
                optional={"reason": st.sampled_from(["R1", "Needs notes"]), "member_id": st.sampled_from(["M0", "M1"])},
            ),
            max_size=4,
        )
    )  # fmt: skip
    return {"payer": {"id": "P1"}, "members": members, "authorization_rules": rules}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_payers(), st.data())
def test_every_inquiry_is_answered_and_reads_back(payer: dict[str, Any], data: st.DataObject) -> None:
    definition = parse_payer(payer)
    asked = data.draw(
        st.lists(
            st.tuples(st.sampled_from(["M0", "M1", "M2", "M3", "ZZ"]), st.booleans()), min_size=1, max_size=4
        )
    )
    subscribers = [
        subscriber_270(member, trace=f"T{i}", last="Lee" if named else "", service_types=data.draw(st.lists(_CODES, min_size=1, max_size=3)))
        for i, (member, named) in enumerate(asked)
    ]  # fmt: skip
    reply = respond(
        "270", interchange("270", eligibility_270(*subscribers)), definition, control_number=2, now=NOW
    )
    [answer] = transactions(reply.text)
    loops = answer.loops.find("2000C")
    assert len(loops) == len(asked)
    for loop in loops:
        ids = [answer.segments[p].id for p in loop.all_positions()]
        assert ("AAA" in ids) != ("EB" in ids), ids
    assert every(answer, "2000C/TRN02") == [f"T{i}" for i in range(len(asked))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_payers(), st.lists(st.sampled_from(["1", "2", "3", "4"]), min_size=1, max_size=4))
def test_every_278_decision_is_the_rules_engines(payer: dict[str, Any], procedures: list[str]) -> None:
    definition = parse_payer(payer)
    reply = respond("278", interchange("278", review_278("M0", *procedures)), definition, control_number=2, now=NOW,
                    number=lambda: "N")  # fmt: skip
    [answer] = transactions(reply.text)
    expected = [
        decide_authorization(definition, procedure_code=code, member_id="M0").action_code
        for code in procedures
    ]
    assert every(answer, "2000F/HCR01") == expected
