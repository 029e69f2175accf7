"""278 → 278 response (X217): HCR by the authorization rules, every rule of a definition."""

from __future__ import annotations

import pytest

from assay.sandboxes.payer import HCR_ACTIONS, parse_payer
from assay.sandboxes.x12 import respond

from ..payer.samples import PAYER
from .reading import every, read, transactions
from .requests import NOW, interchange, review_278

DEFINITION = parse_payer(PAYER)


def _review(member_id: str, *procedures: str, **names: str) -> object:
    reply = respond("278", interchange("278", review_278(member_id, *procedures, **names)), DEFINITION,
                    control_number=9, now=NOW, number=lambda: "CERT42")  # fmt: skip
    assert reply.kind == "278", reply
    [response] = transactions(reply.text)
    return response


@pytest.mark.parametrize("index", range(len(PAYER["authorization_rules"])))
def test_every_rule_answers_with_its_hcr(index: int) -> None:
    rule = DEFINITION.authorization_rules[index]
    member = rule.member_id or "W123456789"
    procedure = rule.procedure_code or "99999"
    response = _review(member, procedure)
    assert response.guide == "005010X217" and read(response, "BHT02") == "11"  # type: ignore[attr-defined]
    assert read(response, "2000F/HCR01") == HCR_ACTIONS[rule.determination]  # type: ignore[arg-type]
    assert read(response, "2000E/HCR01") == HCR_ACTIONS[rule.determination]  # type: ignore[arg-type]
    assert read(response, "2000F/HCR02") == ("CERT42" if rule.determination == "approved" else None)  # type: ignore[arg-type]
    assert read(response, "2000F/MSG01") == rule.reason  # type: ignore[arg-type]
    assert read(response, "2000F/SV101-2") == procedure  # type: ignore[arg-type]
    assert read(response, "2000E/TRN02") == "TR278" and read(response, "2010C/NM1[IL]09") == member  # type: ignore[arg-type]


def test_each_service_is_decided_on_its_own_and_the_default_applies() -> None:
    response = _review("W123456789", "70553", "97110", "J3490", "99213")
    assert every(response, "2000F/HCR01") == ["A1", "A4", "A3", "A1"]  # type: ignore[arg-type]
    assert every(response, "2000F/HCR02") == ["CERT42", None, None, "CERT42"]  # type: ignore[arg-type]
    assert every(response, "2000F/MSG01") == ["Clinical review", "Not medically necessary"]  # type: ignore[arg-type]


def test_an_event_without_services_is_decided_as_a_whole() -> None:
    response = _review("W123456789-01")
    assert read(response, "2000E/HCR01") == "CT" and read(response, "2000E/MSG01") == "Send notes"  # type: ignore[arg-type]


@pytest.mark.parametrize(("member", "names", "code"), [("NOPE", {}, "75"), ("X987", {"last": "Smith"}, "73")])
def test_an_unknown_member_is_rejected_in_2010c(member: str, names: dict[str, str], code: str) -> None:
    response = _review(member, "70553", **names)
    assert read(response, "2010C/AAA03") == code  # type: ignore[arg-type]
    assert every(response, "HCR01") == [] and response.loops.find("2000E") == []  # type: ignore[attr-defined]
