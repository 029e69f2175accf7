"""Member matching (SPEC §5.3): names case-insensitive after trimming, omitted values never mismatch."""

from __future__ import annotations

import pytest

from assay.sandboxes.payer import dependents_of, find_member, match_dependent, names_equal, parse_payer

from .samples import PAYER

DEFINITION = parse_payer(PAYER)


def test_found_by_id_with_names_in_any_case_and_padding() -> None:
    found = find_member(
        DEFINITION, " w123456789 ", first_name=" JANE", last_name="doe  ", birth_date="19800412"
    )
    assert found.member is not None and found.member.first_name == "Jane" and found.reject is None


def test_omitted_name_and_birth_date_are_not_mismatches() -> None:
    assert find_member(DEFINITION, "W123456789").member is not None
    assert (
        find_member(DEFINITION, "W123456789", first_name="", last_name=None, birth_date="").member is not None
    )


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"member_id": "NOPE"}, "75"),
        ({"member_id": ""}, "75"),
        ({"member_id": "W123456789", "last_name": "Smith"}, "73"),
        ({"member_id": "W123456789", "first_name": "Janet"}, "73"),
        ({"member_id": "W123456789", "birth_date": "1980-02-30"}, "58"),
        ({"member_id": "W123456789", "birth_date": "19800413"}, "71"),
    ],
)
def test_rejections_carry_the_aaa_code(kwargs: dict[str, str], code: str) -> None:
    member_id = kwargs.pop("member_id")
    found = find_member(DEFINITION, member_id, **kwargs)
    assert found.member is None and found.reject == code and found.reason


def test_dependents_are_found_under_their_subscriber() -> None:
    jane = DEFINITION.members[0]
    assert [m.first_name for m in dependents_of(DEFINITION, jane)] == ["Tim"]
    assert match_dependent(DEFINITION, jane, first_name="tim", last_name="DOE").member is not None
    assert match_dependent(DEFINITION, jane, first_name="Tom").reject == "73"
    assert match_dependent(DEFINITION, jane, birth_date="2012-03-06").reject == "71"
    lapsed = DEFINITION.members[2]
    assert match_dependent(DEFINITION, lapsed, first_name="Tim").reject == "75"


def test_names_equal() -> None:
    assert names_equal(None, "Ann") and names_equal("  ", "Ann") and names_equal(" aNN ", "Ann")
    assert not names_equal("Anne", "Ann")
