"""`parse_payer`: SPEC §5.3's required keys, typed values, errors keyed by path."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from assay.sandboxes.payer import PayerDefinitionInvalid, parse_payer

from .samples import PAYER, minimal_member


def _errors(data: Any) -> dict[str, list[str]]:
    with pytest.raises(PayerDefinitionInvalid) as caught:
        parse_payer(data)
    return caught.value.errors


def test_the_full_sample_parses_into_typed_values() -> None:
    payer = parse_payer(PAYER)
    jane, tim, _ = payer.members
    assert payer.payer.id == "ACME01" and jane.birth_date == date(1980, 4, 12)
    assert tim.birth_date == date(2012, 3, 5) and tim.gender == "M" and tim.coverage.end is None
    assert jane.benefits[0].deductible_remaining == Decimal("600.00")
    assert jane.benefits[1].coinsurance == Decimal("0.2")
    assert jane.benefits[2].coinsurance == Decimal("0.3")  # 30 read as a percentage
    assert payer.claims[0].paid == Decimal("180.50") and payer.claims[0].status_category == "F1"


def test_only_payer_id_is_required_at_the_top() -> None:
    payer = parse_payer({"payer": {"id": "P"}})
    assert payer.members == () and payer.default_determination.determination == "pended"
    assert _errors({"payer": {}}) == {"payer.id": ["missing required key 'id'"]}
    assert "payer" in _errors({})


@pytest.mark.parametrize("key", ["member_id", "first_name", "last_name", "birth_date"])
def test_each_required_member_key_is_named(key: str) -> None:
    member = minimal_member()
    del member[key]
    assert _errors({"payer": {"id": "P"}, "members": [minimal_member(), member]}) == {
        f"members.1.{key}": [f"missing required key {key!r}"]
    }


@pytest.mark.parametrize(
    ("where", "key"),
    [("benefits", "service_type"), ("benefits", "coverage")],
)
def test_required_benefit_keys(where: str, key: str) -> None:
    benefit = {"service_type": "30", "coverage": "active"}
    del benefit[key]
    errors = _errors({"payer": {"id": "P"}, "members": [minimal_member(benefits=[benefit])]})
    assert list(errors) == [f"members.0.benefits.0.{key}"]


@pytest.mark.parametrize("key", ["patient_control_number", "member_id", "status_category"])
def test_required_claim_keys(key: str) -> None:
    claim = {"patient_control_number": "P1", "member_id": "M1", "status_category": "F1"}
    del claim[key]
    assert list(_errors({"payer": {"id": "P"}, "claims": [claim]})) == [f"claims.0.{key}"]


def test_bad_values_are_named_by_path() -> None:
    errors = _errors(
        {
            "payer": {"id": "P*1"},
            "members": [
                minimal_member(
                    birth_date="1990-13-01",
                    gender="x",
                    coverage={"start": 20260101},
                    benefits=[{"service_type": "30", "coverage": "maybe", "copay": -1, "coinsurance": 150}],
                )
            ],
            "authorization_rules": [
                {"determination": "approved"},
                {"procedure_code": "1", "determination": "ok"},
            ],
            "claims": [
                {"patient_control_number": "P", "member_id": "M1", "status_category": "F1", "charge": True}
            ],
            "copy": 1,
        }
    )
    assert set(errors) == {
        "payer.id",
        "members.0.birth_date",
        "members.0.gender",
        "members.0.coverage.start",
        "members.0.benefits.0.coverage",
        "members.0.benefits.0.copay",
        "members.0.benefits.0.coinsurance",
        "authorization_rules.0",
        "authorization_rules.1.determination",
        "claims.0.charge",
        "copy",
    }
    assert errors["copy"] == ["unknown key 'copy'"]
    assert "X12 delimiter" in errors["payer.id"][0]


def test_a_dependent_must_name_a_known_subscriber() -> None:
    orphan = minimal_member(member_id="D1", relationship="dependent", subscriber_id="NOPE")
    assert _errors({"payer": {"id": "P"}, "members": [minimal_member(), orphan]}) == {
        "members.1.subscriber_id": ["no subscriber has member_id 'NOPE'"]
    }


def test_not_an_object() -> None:
    assert _errors([1]) == {"": ["a payer definition must be a JSON object"]}
    assert str(PayerDefinitionInvalid({"a.b": ["bad"]})) == "a.b: bad"
