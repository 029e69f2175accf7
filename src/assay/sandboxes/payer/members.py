"""Finding a member the way a payer does (docs/sandboxes.md), shared by the 271, 277, 278 and the portal.

Identifiers are compared after trimming and case-folding (`w123` finds `W123`), names
case-insensitively after trimming, and a name or birth date the request leaves out is not a
mismatch. A rejection carries the AAA03 reject reason code the 271 sends (X279A1 2100C AAA):

* `75` subscriber/insured not found — no member has the identifier;
* `73` invalid/missing subscriber/insured name — the name given is not the member's;
* `58` invalid/missing date of birth — the birth date given is not a date;
* `71` patient birth date does not match that for the patient on the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from assay.sandboxes.payer.definition import Member, PayerDefinition, parse_date

__all__ = [
    "MemberMatch",
    "dependents_of",
    "find_member",
    "identifiers_equal",
    "match_dependent",
    "names_equal",
]

NOT_FOUND = "75"
NAME_MISMATCH = "73"
BAD_BIRTH_DATE = "58"
BIRTH_DATE_MISMATCH = "71"


@dataclass(frozen=True, slots=True)
class MemberMatch:
    """The member found, or the AAA03 code and a sentence saying why none was."""

    member: Member | None
    reject: str | None = None
    reason: str | None = None


def identifiers_equal(left: str | None, right: str | None) -> bool:
    return left is not None and right is not None and left.strip().casefold() == right.strip().casefold()


def names_equal(given: str | None, recorded: str) -> bool:
    """True when `given` is omitted (None or blank) or equals `recorded` ignoring case and padding."""
    return not given or not given.strip() or given.strip().casefold() == recorded.strip().casefold()


def find_member(
    payer: PayerDefinition,
    member_id: str | None,
    *,
    first_name: str | None = None,
    last_name: str | None = None,
    birth_date: date | str | None = None,
) -> MemberMatch:
    """The member with `member_id` whose given name and birth date agree (subscriber first)."""
    if not member_id or not member_id.strip():
        return MemberMatch(None, NOT_FOUND, "the request carries no member id")
    candidates = sorted(payer.members_by_id.get(member_id.strip().casefold(), ()), key=_subscriber_first)
    if not candidates:
        return MemberMatch(None, NOT_FOUND, f"no member has id {member_id.strip()!r}")
    return _best(candidates, first_name, last_name, birth_date)


def dependents_of(payer: PayerDefinition, subscriber: Member) -> list[Member]:
    """The dependents whose `subscriber_id` names this subscriber, in definition order."""
    found = payer.dependents_by_subscriber.get(subscriber.member_id.strip().casefold(), ())
    return [m for m in found if m is not subscriber]


def match_dependent(
    payer: PayerDefinition,
    subscriber: Member,
    *,
    member_id: str | None = None,
    first_name: str | None = None,
    last_name: str | None = None,
    birth_date: date | str | None = None,
) -> MemberMatch:
    """The subscriber's dependent the request describes (by own id when given, else by name)."""
    candidates = dependents_of(payer, subscriber)
    if member_id and member_id.strip():
        candidates = [m for m in candidates if identifiers_equal(m.member_id, member_id)]
    if not candidates:
        return MemberMatch(None, NOT_FOUND, f"subscriber {subscriber.member_id!r} has no such dependent")
    return _best(candidates, first_name, last_name, birth_date)


def _subscriber_first(member: Member) -> bool:
    return member.relationship != "subscriber"


def _best(
    candidates: Iterable[Member], first_name: str | None, last_name: str | None, birth_date: date | str | None
) -> MemberMatch:
    """The first candidate with no mismatch; else the first one's reason (name before birth date)."""
    wanted: date | None
    try:
        wanted = parse_date(birth_date) if birth_date not in (None, "") else None
    except ValueError:
        return MemberMatch(None, BAD_BIRTH_DATE, f"birth date {birth_date!r} is not a date")
    first_problem: MemberMatch | None = None
    for member in candidates:
        problem = _mismatch(member, first_name, last_name, wanted)
        if problem is None:
            return MemberMatch(member)
        first_problem = first_problem or problem
    assert first_problem is not None
    return first_problem


def _mismatch(
    member: Member, first_name: str | None, last_name: str | None, wanted: date | None
) -> MemberMatch | None:
    if not names_equal(last_name, member.last_name) or not names_equal(first_name, member.first_name):
        given = " ".join(part.strip() for part in (first_name, last_name) if part and part.strip())
        return MemberMatch(None, NAME_MISMATCH, f"name {given!r} does not match member {member.member_id!r}")
    if wanted is not None and wanted != member.birth_date:
        return MemberMatch(
            None,
            BIRTH_DATE_MISMATCH,
            f"birth date {wanted.isoformat()} does not match member {member.member_id!r}",
        )
    return None
