"""Member lookup and the eligibility summary of the web portal, read from the payer definition.

A lookup needs the member id and the date of birth, as a real payer portal asks for both; members
are matched by `assay.sandboxes.payer.find_member`, the 271's matching. A portal without a payer
definition looks the member up in its `patients` rows instead (no benefits to show then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from assay.sandboxes.payer import Member, PayerDefinition, find_member, identifiers_equal

__all__ = ["BENEFIT_COLUMNS", "Eligibility", "look_up"]

BENEFIT_COLUMNS = (
    ("service_type", "Service type"),
    ("coverage", "Coverage"),
    ("in_network", "In network"),
    ("copay", "Copay"),
    ("coinsurance", "Coinsurance"),
    ("deductible", "Deductible"),
    ("deductible_remaining", "Deductible remaining"),
    ("out_of_pocket", "Out-of-pocket maximum"),
    ("out_of_pocket_remaining", "Out-of-pocket remaining"),
    ("auth_required", "Prior authorization required"),
    ("visit_limit", "Visit limit"),
    ("message", "Notes"),
)


@dataclass(frozen=True, slots=True)
class Eligibility:
    member_id: str
    name: str
    birth_date: str
    payer_name: str | None = None
    plan: str | None = None
    group_number: str | None = None
    relationship: str | None = None
    coverage_start: str | None = None
    coverage_end: str | None = None
    active: bool | None = None
    """Coverage on today's date; None when the portal has no payer definition."""
    benefits: list[dict[str, str]] = field(default_factory=list)


def look_up(
    payer: PayerDefinition | None,
    patients: Sequence[Mapping[str, Any]],
    member_id: str,
    birth_date: str,
    today: date,
) -> Eligibility | str:
    """The member's eligibility, or a sentence saying why none was found."""
    member_id, birth_date = member_id.strip(), birth_date.strip()
    if not member_id or not birth_date:
        return "Enter both the member ID and the date of birth."
    try:
        born = date.fromisoformat(birth_date)
    except ValueError:
        return "Enter the date of birth as YYYY-MM-DD."
    if payer is None:
        return _from_patients(patients, member_id, born)
    match = find_member(payer, member_id, birth_date=born)
    if match.member is None:
        return "No member matches that member ID and date of birth."
    return _summary(match.member, payer.payer.name, today)


def _summary(member: Member, payer_name: str | None, today: date) -> Eligibility:
    coverage = member.coverage
    return Eligibility(
        member_id=member.member_id,
        name=f"{member.first_name} {member.last_name}",
        birth_date=member.birth_date.isoformat(),
        payer_name=payer_name,
        plan=member.plan,
        group_number=member.group_number,
        relationship=member.relationship,
        coverage_start=coverage.start.isoformat() if coverage.start else None,
        coverage_end=coverage.end.isoformat() if coverage.end else None,
        active=coverage.covers(today),
        benefits=[
            {name: _shown(getattr(benefit, name)) for name, _ in BENEFIT_COLUMNS}
            for benefit in member.benefits
        ],
    )


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "Yes" if value else "No"
    return str(value)


def _from_patients(patients: Sequence[Mapping[str, Any]], member_id: str, born: date) -> Eligibility | str:
    for row in patients:
        if (
            identifiers_equal(str(row.get("member_id") or ""), member_id)
            and row.get("birth_date") == born.isoformat()
        ):
            name = (
                row.get("name")
                or " ".join(str(row.get(k) or "") for k in ("first_name", "last_name")).strip()
            )
            return Eligibility(str(row["member_id"]), str(name), born.isoformat(), plan=row.get("plan"))
    return "No member matches that member ID and date of birth."
