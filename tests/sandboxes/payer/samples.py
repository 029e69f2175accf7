"""A payer definition exercising every key of SPEC §5.3 (written for these tests)."""

from __future__ import annotations

from typing import Any

PAYER: dict[str, Any] = {
    "payer": {"name": "Acme Health", "id": "ACME01", "id_qualifier": "PI"},
    "members": [
        {
            "member_id": "W123456789",
            "first_name": "Jane",
            "last_name": "Doe",
            "birth_date": "1980-04-12",
            "gender": "F",
            "relationship": "subscriber",
            "group_number": "GRP100",
            "plan": "Gold PPO",
            "coverage": {"start": "2026-01-01", "end": "2026-12-31"},
            "benefits": [
                {"service_type": "30", "coverage": "active", "in_network": True, "deductible": 1500,
                 "deductible_remaining": "600.00", "out_of_pocket": 5000, "out_of_pocket_remaining": 4200},
                {"service_type": "98", "coverage": "active", "in_network": True, "copay": 25,
                 "coinsurance": 0.2, "visit_limit": 20, "message": "Specialist visits need a referral"},
                {"service_type": "MH", "coverage": "active", "auth_required": True, "coinsurance": 30},
                {"service_type": "UC", "coverage": "not_covered"},
            ],
        },
        {
            "member_id": "W123456789-01",
            "first_name": "Tim",
            "last_name": "Doe",
            "birth_date": "20120305",
            "gender": "male",
            "relationship": "dependent",
            "subscriber_id": "W123456789",
            "plan": "Gold PPO",
            "coverage": {"start": "2026-01-01"},
            "benefits": [{"service_type": "30", "coverage": "active", "copay": 10}],
        },
        {
            "member_id": "X987",
            "first_name": "Ray",
            "last_name": "Lapsed",
            "birth_date": "1955-01-30",
            "coverage": {"start": "2020-01-01", "end": "2024-12-31"},
            "benefits": [{"service_type": "30", "coverage": "active"}],
        },
    ],
    "claims": [
        {"patient_control_number": "PCN001", "member_id": "W123456789", "provider_npi": "1234567893",
         "service_date": "2026-03-02", "charge": 250, "status_category": "F1", "status_code": "65",
         "paid": "180.50", "paid_date": "2026-03-20", "check_number": "CHK5550"},
        {"patient_control_number": "PCN002", "member_id": "W123456789", "status_category": "P1",
         "status_code": "20", "charge": 90},
    ],
    "authorization_rules": [
        {"procedure_code": "70553", "member_id": "X987", "determination": "denied", "reason": "Coverage ended"},
        {"procedure_code": "70553", "determination": "approved"},
        {"procedure_code": "97110", "determination": "pended", "reason": "Clinical review"},
        {"member_id": "W123456789-01", "determination": "more_info_needed", "reason": "Send notes"},
        {"procedure_code": "J3490", "determination": "denied", "reason": "Not medically necessary"},
    ],
    "default_determination": {"determination": "approved"},
}  # fmt: skip


def minimal_member(**overrides: Any) -> dict[str, Any]:
    return {
        "member_id": "M1",
        "first_name": "Ann",
        "last_name": "Lee",
        "birth_date": "1990-01-01",
        **overrides,
    }
