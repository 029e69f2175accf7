"""Request builders for the clearinghouse tests: 270, 276 and 278 interchanges as an agent sends them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from assay.formats.x12 import build_interchange, build_transaction, write_x12

NOW = datetime(2026, 5, 1, 12, 30, tzinfo=UTC)
SENT = datetime(2026, 4, 30, 9, 15, tzinfo=UTC)

Row = tuple[Any, ...]
GUIDES = {"270": "005010X279A1", "276": "005010X212", "278": "005010X217"}


def interchange(code: str, *bodies: Sequence[Row], control: int = 905) -> str:
    """One interchange from the agent (`AGENT01` → `ACME01`) with one transaction set per body."""
    sets = [
        build_transaction(code, body, control_number=f"{i:04d}", guide=GUIDES[code])
        for i, body in enumerate(bodies, 1)
    ]
    built = build_interchange(
        sets, sender_id="AGENT01", receiver_id="ACME01", control_number=control, usage="T", when=SENT,
        application_sender="AGENTAPP", application_receiver="ACMEAPP",
    )  # fmt: skip
    return write_x12(built)


def subscriber_270(
    member_id: str | None,
    *,
    trace: str,
    last: str = "",
    first: str = "",
    birth: str | None = None,
    service_types: Sequence[str] = ("30",),
    date: str | None = None,
    dependents: Sequence[Row] = (),
) -> list[Row]:
    """The 2000C (and 2000D) rows for one subscriber; HL numbers are filled by `eligibility_270`."""
    rows: list[Row] = [("HL", "", "", "22", "1" if dependents else "0")]
    if not dependents:
        rows.append(("TRN", "1", trace, "9AGENT0001"))
    rows.append(("NM1", "IL", "1", last, first, "", "", "", "MI" if member_id else "", member_id or ""))
    if birth:
        rows.append(("DMG", "D8", birth))
    if date and not dependents:
        rows.append(("DTP", "291", "D8", date))
    if not dependents:
        rows.append(("EQ", list(service_types)))
    rows.extend(dependents)
    return rows


def dependent_270(*, trace: str, last: str, first: str, birth: str | None = None) -> list[Row]:
    rows: list[Row] = [
        ("HL", "", "", "23", "0"),
        ("TRN", "1", trace, "9AGENT0001"),
        ("NM1", "03", "1", last, first),
    ]
    if birth:
        rows.append(("DMG", "D8", birth))
    rows.append(("EQ", "30"))
    return rows


def eligibility_270(*subscribers: list[Row], reference: str = "REF001") -> list[Row]:
    """BHT, payer (2000A), provider (2000B) and the subscribers, HL ids and parents numbered."""
    rows: list[Row] = [
        ("BHT", "0022", "13", reference, "20260430", "0915"),
        ("HL", "", "", "20", "1"), ("NM1", "PR", "2", "ACME HEALTH", "", "", "", "", "PI", "ACME01"),
        ("HL", "", "", "21", "1"), ("NM1", "1P", "2", "GOOD CLINIC", "", "", "", "", "XX", "1234567893"),
    ]  # fmt: skip
    for subscriber in subscribers:
        rows.extend(subscriber)
    return number_hl(rows)


def number_hl(rows: list[Row]) -> list[Row]:
    """HL01 1, 2, …; HL02 the nearest earlier HL one level up (20 → 21 → 22|19 → 22 → 23, EV → SS)."""
    order = {"20": 0, "21": 1, "19": 2, "22": 3, "23": 4, "EV": 5, "SS": 6}
    stack: list[tuple[int, str]] = []
    numbered: list[Row] = []
    count = 0
    for row in rows:
        if row[0] != "HL":
            numbered.append(row)
            continue
        count += 1
        depth = order[row[3]]
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        stack.append((depth, str(count)))
        numbered.append(("HL", str(count), parent, row[3], *row[4:]))
    return numbered


def claim_status_276(*claims: tuple[str, str, str], reference: str = "REF276") -> list[Row]:
    """One 2000D per (member id, trace/patient control number, charge)."""
    rows: list[Row] = [
        ("BHT", "0010", "13", reference, "20260430", "0915"),
        ("HL", "", "", "20", "1"), ("NM1", "PR", "2", "ACME HEALTH", "", "", "", "", "PI", "ACME01"),
        ("HL", "", "", "21", "1"), ("NM1", "41", "2", "GOOD CLINIC", "", "", "", "", "46", "X67E"),
        ("HL", "", "", "19", "1"), ("NM1", "1P", "2", "GOOD CLINIC", "", "", "", "", "XX", "1234567893"),
    ]  # fmt: skip
    for member_id, trace, charge in claims:
        rows.extend(
            [
                ("HL", "", "", "22", "0"),
                ("NM1", "IL", "1", "DOE", "JANE", "", "", "", "MI", member_id),
                ("TRN", "1", trace),
                ("REF", "EJ", trace),
                ("AMT", "T3", charge),
                ("DTP", "472", "D8", "20260302"),
            ]
        )
    return number_hl(rows)


def review_278(
    member_id: str, *procedures: str, last: str = "", first: str = "", trace: str = "TR278"
) -> list[Row]:
    """A 278 request: one patient event (2000E) with one service (2000F) per procedure code."""
    rows: list[Row] = [
        ("BHT", "0007", "13", "REF278", "20260430", "0915"),
        ("HL", "", "", "20", "1"), ("NM1", "X3", "2", "ACME HEALTH", "", "", "", "", "PI", "ACME01"),
        ("HL", "", "", "21", "1"), ("NM1", "1P", "2", "GOOD CLINIC", "", "", "", "", "XX", "1234567893"),
        ("HL", "", "", "22", "1"), ("NM1", "IL", "1", last, first, "", "", "", "MI", member_id),
        ("HL", "", "", "EV", "1" if procedures else "0"), ("TRN", "1", trace, "9AGENT0001"),
        ("UM", "HS", "I", "2"), ("DTP", "472", "D8", "20260510"),
    ]  # fmt: skip
    for code in procedures:
        rows.extend([("HL", "", "", "SS", "0"), ("UM", "HS", "I"), ("SV1", ("HC", code), "100", "UN", "1")])
    return number_hl(rows)
