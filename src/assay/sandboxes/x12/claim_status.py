"""276 → 277 (005010X212), as a payer answers (docs/sandboxes.md).

Each claim asked about — a TRN opening a 2200D (subscriber) or 2200E (dependent) loop, with the
REF*EJ patient account number and AMT*T3 charge that follow it — is looked up among the payer's
claims by patient control number (TRN02, else REF*EJ; `x12-response` reads it at `2200D/TRN02`) and
member (the subscriber of the 2000D, or one of their dependents). Found: TRN*2 echoed, then
STC*category:status with the status date (paid date, else today), total charge (STC04), paid
amount (STC05), adjudication date (STC06), and for a paid claim the payment method, date and
check number (STC07–STC09); REF*EJ and DTP*472 the service date. Unknown: `STC*A4:35` (not found
in the adjudication system) with the charge the request gave. X212 requires STC04 and STC05, so
an amount the payer definition leaves out is written as the request's charge, or 0.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from assay.formats.x12 import X12Segment, X12TransactionSet
from assay.sandboxes.payer import Claim, PayerDefinition, dependents_of, find_member
from assay.sandboxes.x12._hl import (
    HlNode,
    Reply,
    Row,
    answering_bht,
    echo,
    echoed,
    hl_tree,
    payer_name,
    write_hl,
)
from assay.sandboxes.x12._values import amount, d8

__all__ = ["answer_276"]

_NAMES = {"20": "PR", "21": "41", "19": "1P"}


def answer_276(transaction: X12TransactionSet, payer: PayerDefinition, *, now: datetime) -> list[Row]:
    """The 277 body (BHT and the HL loops) answering one 276 transaction set."""
    header = answering_bht(transaction, "0010", "08", now, "DG")
    return [header, *write_hl([_node(node, payer, now, None) for node in hl_tree(transaction)])]


def _node(node: HlNode, payer: PayerDefinition, now: datetime, subscriber: str | None) -> Reply:
    if node.level == "20":
        rows: list[Row] = [payer_name(payer, "PR")]
    elif node.level in ("22", "23"):
        nm1 = node.first("NM1")
        if node.level == "22":
            subscriber = echo(nm1.element(9)) if nm1 is not None else ""
        rows = echoed(nm1)
        rows.extend(_claims(node, payer, now, subscriber or ""))
    else:
        rows = echoed(node.first("NM1"))
    return Reply(node.level, rows, [_node(child, payer, now, subscriber) for child in node.children])


def _claims(node: HlNode, payer: PayerDefinition, now: datetime, member_id: str) -> list[Row]:
    rows: list[Row] = []
    for trn, following in _claim_groups(node.segments):
        refs = {s.element(2).strip() for s in following if s.id == "REF" and s.element(1).strip() == "EJ"}
        charge = next(
            (s.element(2).strip() for s in following if s.id == "AMT" and s.element(1).strip() == "T3"), ""
        )
        keys = [trn.element(2).strip(), *sorted(refs)]
        claim = _find(payer, keys, member_id)
        rows.append(("TRN", "2", echo(trn.element(2))))
        rows.extend(_status(claim, now, echo(charge)) if claim else [_unknown(now, echo(charge))])
        account = claim.patient_control_number if claim else next(iter(sorted(refs)), "")
        if account:
            rows.append(("REF", "EJ", echo(account)))
        if claim is not None and claim.service_date is not None:
            rows.append(("DTP", "472", "D8", d8(claim.service_date)))
    return rows


def _claim_groups(segments: list[X12Segment]) -> list[tuple[X12Segment, list[X12Segment]]]:
    """Each TRN with the segments after it up to the next TRN (one 2200D/2200E claim loop each)."""
    groups: list[tuple[X12Segment, list[X12Segment]]] = []
    for segment in segments:
        if segment.id == "TRN":
            groups.append((segment, []))
        elif groups:
            groups[-1][1].append(segment)
    return groups


def _find(payer: PayerDefinition, keys: list[str], member_id: str) -> Claim | None:
    """The claim with one of these control numbers, belonging to the subscriber or a dependent."""
    family = {member_id.casefold()}
    found = find_member(payer, member_id)
    if found.member is not None:
        family.update(m.member_id.casefold() for m in dependents_of(payer, found.member))
    index = payer.claims_by_control_number
    for key in keys:
        for claim in index.get(key.strip().casefold(), ()) if key.strip() else ():
            if not member_id or claim.member_id.strip().casefold() in family:
                return claim
    return None


def _status(claim: Claim, now: datetime, requested_charge: str) -> list[Row]:
    category = (claim.status_category, claim.status_code) if claim.status_code else claim.status_category
    effective = d8(claim.paid_date) if claim.paid_date else d8(now)
    charge = amount(claim.charge) if claim.charge is not None else (requested_charge or "0")
    paid = amount(claim.paid if claim.paid is not None else Decimal(0))
    payment: tuple[str, ...] = ()
    if claim.check_number or claim.paid_date:
        paid_on = d8(claim.paid_date) if claim.paid_date else ""
        payment = (paid_on, "CHK" if claim.check_number else "", paid_on, echo(claim.check_number))
    return [("STC", category, effective, "", charge, paid, *payment)]


def _unknown(now: datetime, requested_charge: str) -> Row:
    return ("STC", ("A4", "35"), d8(now), "", requested_charge or "0", "0")
