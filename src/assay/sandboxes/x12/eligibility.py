"""270 → 271 (005010X279A1), as a payer answers (docs/sandboxes.md).

Per subscriber (2000C) and dependent (2000D) of the inquiry, in order: the member is found by
`payer.find_member` / `match_dependent` (AAA in 2100C/2100D with the reject code when not),
then, on the inquiry date (DTP*291 of the member loop, else BHT04), either `EB*6` (coverage not
active) or the benefits of the service types asked (EQ01; `30` or none asks for all):
`EB*1` per active service type with the plan (EB05), plan dates (DTP*291), EB11 `Y`/`N` when
authorization is (not) required, EB12 the network and MSG; then `EB*B` copay (EB07), `EB*A`
coinsurance (EB08), `EB*C` deductible and remaining (EB06 `23` calendar year, `29` remaining),
`EB*G` out of pocket likewise, `EB*F` the visit limit (EB09 `VS`, EB10); `EB*6` for an inactive
benefit, `EB*I` for one not covered. An active member always gets a plan-level `EB*1**30`.
The inquiry's TRNs are echoed as TRN*2 in the same HL loop.
"""

from __future__ import annotations

from datetime import date, datetime

from assay.formats.x12 import X12TransactionSet
from assay.sandboxes.payer import Benefit, Member, PayerDefinition, parse_date
from assay.sandboxes.x12._hl import (
    HlNode,
    Reply,
    Row,
    answering_bht,
    dependent_named,
    hl_answer,
    member_named,
    rejection_rows,
    trn_echo,
)
from assay.sandboxes.x12._values import amount, d8, period_rows

__all__ = ["answer_270"]


def answer_270(transaction: X12TransactionSet, payer: PayerDefinition, *, now: datetime) -> list[Row]:
    """The 271 body (BHT and the HL loops) answering one 270 transaction set."""
    bht = next((s for s in transaction.segments if s.id == "BHT"), None)
    asked_on = _date(bht.element(4) if bht is not None else "") or now.date()
    header = answering_bht(transaction, "0022", "11", now)
    context = _Context(payer, asked_on)
    return [header, *hl_answer(transaction, payer, "PR", context.subscriber)]


class _Context:
    def __init__(self, payer: PayerDefinition, asked_on: date):
        self.payer = payer
        self.asked_on = asked_on

    def subscriber(self, node: HlNode) -> Reply:
        nm1 = node.first("NM1")
        found = member_named(self.payer, nm1, _birth_date(node))
        reply = Reply(node.level, trn_echo(node))
        if found.member is None:
            reply.rows.extend(rejection_rows(nm1, found))
            return reply
        member = found.member
        reply.rows.extend(_member_rows(member, "IL"))
        if node.children:
            reply.children = [self.dependent(child, member) for child in node.children]
        else:
            reply.rows.extend(self.benefits(member, node))
        return reply

    def dependent(self, node: HlNode, subscriber: Member) -> Reply:
        nm1 = node.first("NM1")
        found = dependent_named(self.payer, subscriber, nm1, _birth_date(node))
        reply = Reply(node.level, trn_echo(node))
        if found.member is None:
            reply.rows.extend(rejection_rows(nm1, found))
        else:
            reply.rows.extend(_member_rows(found.member, "03"))
            reply.rows.extend(self.benefits(found.member, node))
        return reply

    def benefits(self, member: Member, node: HlNode) -> list[Row]:
        day = _service_date(node) or self.asked_on
        plan = member.plan or ""
        dates = period_rows(member.coverage, both="291", start="346", end="349")
        if not member.coverage.covers(day):
            return [("EB", "6", "IND", "30", "", plan), *dates]
        asked = _service_types(node)
        chosen = [b for b in member.benefits if asked is None or b.service_type in asked]
        rows: list[Row] = []
        if not any(b.service_type == "30" for b in chosen):
            rows.extend([("EB", "1", "IND", "30", "", plan), *dates])
        for benefit in chosen:
            rows.extend(_benefit_rows(benefit, plan, dates))
        return rows


def _benefit_rows(benefit: Benefit, plan: str, dates: list[Row]) -> list[Row]:
    st = benefit.service_type
    if benefit.coverage == "inactive":
        return [("EB", "6", "IND", st, "", plan)]
    if benefit.coverage == "not_covered":
        return [("EB", "I", "IND", st, "", plan)]
    network = _flag(benefit.in_network)
    rows: list[Row] = [
        ("EB", "1", "IND", st, "", plan, "", "", "", "", "", _flag(benefit.auth_required), network)
    ]
    rows.extend(dates)
    if benefit.message:
        rows.append(("MSG", benefit.message))

    def money(code: str, period: str, value: object) -> Row:
        return ("EB", code, "IND", st, "", "", period, value, "", "", "", "", network)

    if benefit.copay is not None:
        rows.append(money("B", "", amount(benefit.copay)))
    if benefit.coinsurance is not None:
        rows.append(("EB", "A", "IND", st, "", "", "", "", amount(benefit.coinsurance), "", "", "", network))
    for code, total, left in (
        ("C", benefit.deductible, benefit.deductible_remaining),
        ("G", benefit.out_of_pocket, benefit.out_of_pocket_remaining),
    ):
        if total is not None:
            rows.append(money(code, "23", amount(total)))
        if left is not None:
            rows.append(money(code, "29", amount(left)))
    if benefit.visit_limit is not None:
        rows.append(("EB", "F", "IND", st, "", "", "23", "", "", "VS", benefit.visit_limit, "", network))
    return rows


def _flag(value: bool | None) -> str:
    return "" if value is None else ("Y" if value else "N")


def _member_rows(member: Member, entity: str) -> list[Row]:
    """2100C/2100D: name (a dependent's NM108/NM109 are not used in X279A1), group, DMG, plan dates."""
    identifier = ("MI", member.member_id) if entity == "IL" else ()
    rows: list[Row] = [("NM1", entity, "1", member.last_name, member.first_name, "", "", "", *identifier)]
    if member.group_number:
        rows.append(("REF", "6P", member.group_number))
    rows.append(("DMG", "D8", d8(member.birth_date), member.gender or ""))
    if member.coverage.start is not None:
        rows.append(("DTP", "346", "D8", d8(member.coverage.start)))
    if member.coverage.end is not None:
        rows.append(("DTP", "347", "D8", d8(member.coverage.end)))
    return rows


def _birth_date(node: HlNode) -> str | None:
    return node.value("DMG", 2)


def _service_date(node: HlNode) -> date | None:
    for dtp in node.all("DTP", "291"):
        return _date(dtp.element(3).split("-")[0])
    return None


def _service_types(node: HlNode) -> set[str] | None:
    """EQ01 codes asked (every repetition of every EQ); None = all (no EQ, or `30` among them)."""
    codes: set[str] = set()
    for eq in node.all("EQ"):
        codes.update(code.strip().upper() for code in eq.repetitions(1) if code.strip())
    return None if not codes or "30" in codes else codes


def _date(text: str) -> date | None:
    try:
        return parse_date(text.strip()) if text.strip() else None
    except ValueError:
        return None
