"""The authorization rules engine (SPEC §5.3): in order, first match wins, else the default."""

from __future__ import annotations

import re

import pytest

from assay.sandboxes.payer import decide_authorization, new_certification_number, parse_payer

from .samples import PAYER

DEFINITION = parse_payer(PAYER)


@pytest.mark.parametrize(
    ("procedure", "member", "determination", "reason", "rule"),
    [
        ("70553", "X987", "denied", "Coverage ended", 0),  # both selectors must match; earlier wins
        ("70553", "W123456789", "approved", None, 1),
        (" 70553 ", "x987", "denied", "Coverage ended", 0),  # trimmed, case-folded
        ("97110", "W123456789", "pended", "Clinical review", 2),
        ("97110", "W123456789-01", "pended", "Clinical review", 2),  # rule 2 comes before rule 3
        ("99213", "W123456789-01", "more_info_needed", "Send notes", 3),
        ("j3490", "W123456789", "denied", "Not medically necessary", 4),
        ("99213", "W123456789", "approved", None, None),  # the default
        (None, None, "approved", None, None),
    ],
)
def test_first_matching_rule_wins(
    procedure: str | None, member: str | None, determination: str, reason: str | None, rule: int | None
) -> None:
    decided = decide_authorization(
        DEFINITION, procedure_code=procedure, member_id=member, number=lambda: "N1"
    )
    assert (decided.determination, decided.reason, decided.rule) == (determination, reason, rule)
    assert decided.auth_number == ("N1" if determination == "approved" else None)


def test_every_rule_is_reachable_and_maps_to_an_hcr_action() -> None:
    for index, rule in enumerate(DEFINITION.authorization_rules):
        decided = decide_authorization(
            DEFINITION, procedure_code=rule.procedure_code, member_id=rule.member_id
        )
        assert decided.rule == index
        assert (
            decided.action_code
            == {"approved": "A1", "denied": "A3", "pended": "A4", "more_info_needed": "CT"}[
                rule.determination
            ]
        )


def test_default_determination_when_none_is_given() -> None:
    bare = parse_payer({"payer": {"id": "P"}})
    decided = decide_authorization(bare, procedure_code="1", member_id="2")
    assert decided.determination == "pended" and decided.action_code == "A4" and decided.auth_number is None


def test_certification_numbers_are_fresh_and_readable() -> None:
    numbers = {new_certification_number() for _ in range(50)}
    assert len(numbers) == 50
    assert all(re.fullmatch(r"AUTH[0-9A-HJ-NP-Z]{10}", n) for n in numbers)
