"""278 request → 278 response (005010X217), decided by the payer's authorization rules.

The UMO (2000A) is the payer; the requester (2000B) is echoed; the subscriber (2000C) and any
dependent (2000D) are found as in a 271 (AAA in 2010C/2010D with the reject code stops the
review below them). Each patient event (2000E) echoes its TRN as TRN*2 and its UM. When the
event lists services (2000F) each service is decided on its own procedure code (SV1-01-2,
SV2-02-2 or SV3-01-2) and answers with UM, HCR, the service line and MSG; an event without
services is decided as a whole (no procedure code: member rules and the default apply). HCR01
is `A1` certified with the certification number in HCR02, `A3` not certified, `A4` pended,
`CT` contact payer; the rule's reason is the MSG. `payer.decide_authorization` decides, the
same engine the portal's `prior_auth_requests` use (docs/sandboxes.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from assay.formats.x12 import X12Segment, X12TransactionSet
from assay.sandboxes.payer import Member, PayerDefinition, decide_authorization
from assay.sandboxes.x12._hl import (
    HlNode,
    Reply,
    Row,
    answering_bht,
    dependent_named,
    echoed,
    hl_answer,
    member_named,
    rejection_rows,
    trn_echo,
)

__all__ = ["answer_278"]


def answer_278(
    transaction: X12TransactionSet, payer: PayerDefinition, *, now: datetime, number: Callable[[], str]
) -> list[Row]:
    """The 278 response body (BHT and the HL loops) answering one 278 request."""
    header = answering_bht(transaction, "0007", "11", now)
    review = _Review(payer, number)
    return [header, *hl_answer(transaction, payer, "X3", review.subscriber)]


class _Review:
    def __init__(self, payer: PayerDefinition, number: Callable[[], str]):
        self.payer = payer
        self.number = number

    def subscriber(self, node: HlNode) -> Reply:
        nm1 = node.first("NM1")
        found = member_named(self.payer, nm1, node.value("DMG", 2))
        if found.member is None:
            return Reply(node.level, rejection_rows(nm1, found))
        member = found.member
        reply = Reply(node.level, [_name(member, "IL")])
        for child in node.children:
            reply.children.append(
                self.dependent(child, member) if child.level == "23" else self.event(child, member)
            )
        return reply

    def dependent(self, node: HlNode, subscriber: Member) -> Reply:
        nm1 = node.first("NM1")
        found = dependent_named(self.payer, subscriber, nm1, node.value("DMG", 2))
        if found.member is None:
            return Reply(node.level, rejection_rows(nm1, found))
        patient = found.member
        return Reply(
            node.level, [_name(patient, "QC")], [self.event(child, patient) for child in node.children]
        )

    def event(self, node: HlNode, patient: Member) -> Reply:
        rows = [*trn_echo(node), *echoed(node.first("UM"))]
        services = [child for child in node.children if child.level == "SS"]
        if not services:
            rows.extend(self.decision(None, patient.member_id))
        return Reply(node.level, rows, [self.service(child, patient) for child in services])

    def service(self, node: HlNode, patient: Member) -> Reply:
        line = next((s for s in node.segments if s.id in ("SV1", "SV2", "SV3")), None)
        decision = self.decision(_procedure(line), patient.member_id)
        rows = [*trn_echo(node), *echoed(node.first("UM")), *decision[:1], *echoed(line), *decision[1:]]
        return Reply(node.level, rows)

    def decision(self, procedure: str | None, member_id: str) -> list[Row]:
        """HCR, then MSG with the reason when the rule gives one."""
        decided = decide_authorization(
            self.payer, procedure_code=procedure, member_id=member_id, number=self.number
        )
        rows: list[Row] = [("HCR", decided.action_code, decided.auth_number or "")]
        if decided.reason:
            rows.append(("MSG", decided.reason))
        return rows


def _name(member: Member, entity: str) -> Row:
    return ("NM1", entity, "1", member.last_name, member.first_name, "", "", "", "MI", member.member_id)


def _procedure(line: X12Segment | None) -> str | None:
    """The procedure code of a service line: SV1-01-2 / SV3-01-2, SV2-02-2 (institutional)."""
    if line is None:
        return None
    parts = line.components(2 if line.id == "SV2" else 1)
    return parts[1].strip() if len(parts) > 1 and parts[1].strip() else None
