"""The clearinghouse: one request (bytes) and a payer definition in, one reply (X12 text) out.

Pure — no clock, no store, no HTTP: the caller passes `now`, a fresh interchange control number
and the certification-number generator, and keeps the exchange. For each interchange of the
request, in order:

1. Not X12, or an envelope X12.5 forbids (ISA widths and codes, missing or disagreeing IEA,
   segments outside GS…GE) → a TA1 interchange acknowledgement rejecting it (TA104 `R`, the
   note code in TA105); nothing inside is read. So is a request holding a NUL (TA105 `024`:
   not X12 text, and PostgreSQL could not store it), and an interchange whose control number
   (ISA13) the run already used (`used`, or an earlier interchange of the same request) when
   the payer refuses reuse (`duplicate_interchange: "reject"`, the default): TA105 `025`.
2. Each functional group: every transaction set is checked (`syntax.check_transaction`; a 276
   posted to the 270 endpoint is rejected, IK5 `1`). A group with errors gets a 999 (X231A1)
   naming the segment and element of each (IK3/IK4); a group whose GE disagrees is rejected
   whole (AK9 `R`).
3. Every accepted transaction set is answered (271, 277 or 278), each its own ST…SE.

The reply interchange swaps sender and receiver (ISA05–08, GS02/GS03), carries the control
number given (ISA13, GS06), keeps ISA15 (test or production), and adds `TA1*…*A*000` when the
request asked for one (ISA14 `1`). Its delimiters are always `* : ^ ~`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from assay.formats.x12 import (
    EnvelopeProblem,
    GroupAck,
    X12FunctionalGroup,
    X12Interchange,
    X12ParseError,
    X12TransactionSet,
    build_999,
    build_interchange,
    build_segment,
    build_ta1,
    build_transaction,
    decode_x12,
    envelope_problem,
    parse_x12,
    write_x12,
)
from assay.sandboxes.payer import PayerDefinition, new_certification_number
from assay.sandboxes.x12._hl import Row
from assay.sandboxes.x12.claim_status import answer_276
from assay.sandboxes.x12.eligibility import answer_270
from assay.sandboxes.x12.review import answer_278
from assay.sandboxes.x12.syntax import GUIDE_IDS, check_transaction

__all__ = ["ENDPOINTS", "X12Reply", "respond"]

ENDPOINTS = {"270": "271", "276": "277", "278": "278"}
"""Request transaction set → the response transaction set the endpoint answers with."""

_IK5 = {
    "1": "transaction set not supported by this endpoint",
    "2": "SE trailer missing",
    "3": "SE02 does not match ST02",
    "4": "SE01 does not count the segments ST…SE",
}
_SENDER = "ASSAYCH"
"""Our ISA06/GS02 when the request had no readable ISA to swap."""


@dataclass(frozen=True)
class X12Reply:
    """What the clearinghouse answered: the text, its kind and what was wrong with the request."""

    text: str
    kind: str
    """`271`, `277` or `278` when at least one transaction set was answered, else `999` or `TA1`."""
    answered: int = 0
    """Transaction sets answered with a 271/277/278."""
    problems: tuple[str, ...] = field(default=())
    """One sentence per refusal (TA1 note, 999 segment error), for the exchange record."""
    control_number: str | None = None
    """ISA13 of the request's first interchange the envelope checks let through (it is then
    used: a later interchange of the run reusing it is a duplicate), else None."""


DUPLICATE = EnvelopeProblem("025", "Duplicate Interchange Control Number")
NUL = EnvelopeProblem("024", "the interchange holds a NUL character (U+0000), which is not X12 text")


def respond(
    endpoint: str,
    body: bytes | str,
    payer: PayerDefinition,
    *,
    control_number: int,
    now: datetime,
    number: Callable[[], str] = new_certification_number,
    used: Callable[[str], bool] = lambda _: False,
) -> X12Reply:
    """Answer one request posted to `endpoint` (`270`, `276` or `278`); `used` says whether an
    earlier exchange of the run already sent an interchange control number (ISA13).

    Raises:
        KeyError: `endpoint` is not one of `ENDPOINTS` (the router only mounts those).
    """
    response_code = ENDPOINTS[endpoint]
    text = decode_x12(body)
    try:
        document = parse_x12(text.replace("\x00", "\ufffd"), strict=False)
    except X12ParseError as exc:
        problem = EnvelopeProblem("023" if _truncated(body) else "022", exc.reason)
        return _ta1_only(None, problem, control_number, now)
    if "\x00" in text:
        # Refused on every backend alike (PostgreSQL text cannot hold a NUL, and a reply would
        # echo it), addressed by its first ISA (NULs read as U+FFFD there).
        first = document.interchanges[0] if document.interchanges else None
        return _ta1_only(first, NUL, control_number, now)
    trailing = any("after IEA" in warning for warning in document.warnings)
    parts: list[str] = []
    answered = 0
    problems: list[str] = []
    kinds: list[str] = []
    controls: list[str] = []
    for offset, interchange in enumerate(document.interchanges):
        last = offset == len(document.interchanges) - 1
        refusal = envelope_problem(interchange, trailing=trailing and last)
        if refusal is None:
            control = interchange.isa.element(13).strip()
            if payer.duplicate_interchange == "reject" and (control in controls or used(control)):
                refusal = DUPLICATE
            controls.append(control)
        if refusal is not None:
            reply = _ta1_only(interchange, refusal, control_number + offset, now)
        else:
            reply = _answer(endpoint, response_code, interchange, payer, control_number + offset, now, number)
        parts.append(reply.text)
        answered += reply.answered
        problems.extend(reply.problems)
        kinds.append(reply.kind)
    kind = response_code if answered else ("999" if "999" in kinds else "TA1")
    return X12Reply("".join(parts), kind, answered, tuple(problems), controls[0] if controls else None)


def _truncated(body: bytes | str) -> bool:
    text = decode_x12(body).strip()
    return text.startswith("ISA") and len(text) < 106


def _ta1_only(
    isa_source: X12Interchange | None, problem: EnvelopeProblem, control: int, now: datetime
) -> X12Reply:
    isa = isa_source.isa if isa_source is not None else None
    interchange = _reply_interchange([], isa_source, control, now)
    interchange.other.append(build_ta1(isa, problem, when=now))
    return X12Reply(write_x12(interchange), "TA1", 0, (f"TA1 {problem.code}: {problem.message}",))


def _answer(
    endpoint: str,
    response_code: str,
    interchange: X12Interchange,
    payer: PayerDefinition,
    control: int,
    now: datetime,
    number: Callable[[], str],
) -> X12Reply:
    responses: list[list[Row]] = []
    acknowledgements: list[X12TransactionSet] = []
    problems: list[str] = []
    for group in interchange.groups:
        acks = tuple(check_transaction(transaction, endpoint) for transaction in group.transactions)
        group_codes = _group_codes(group)
        for transaction, ack in zip(group.transactions, acks, strict=True):
            problems.extend(f"{ack.code} {ack.control_number}: {error.message}" for error in ack.errors)
            problems.extend(f"{ack.code} {ack.control_number}: {_IK5[code]}" for code in ack.set_codes)
            if ack.accepted and not group_codes:
                responses.append(_ANSWER[endpoint](transaction, payer, now, number))
        if group_codes or not all(ack.accepted for ack in acks):
            gs = group.gs
            problems.extend(f"functional group: AK905 {code}" for code in group_codes)
            summary = GroupAck(
                gs.element(1).strip() if gs is not None else "",
                gs.element(6).strip() if gs is not None else "",
                gs.element(8).strip() or None if gs is not None else None,
                acks,
                group_codes,
            )
            acknowledgements.append(build_999(summary, control_number=f"{len(acknowledgements) + 1:04d}"))
    transactions = [
        build_transaction(response_code, rows, control_number=f"{index:04d}", guide=GUIDE_IDS[endpoint])
        for index, rows in enumerate(responses, start=1)
    ]
    reply = _reply_interchange([*acknowledgements, *transactions], interchange, control, now)
    if interchange.isa.element(14).strip() == "1":
        accepted = build_ta1(interchange.isa, EnvelopeProblem("000", "accepted"), when=now)
        reply.other.append(build_segment("TA1", *accepted.elements[:3], "A", "000"))
    kind = response_code if transactions else "999"
    return X12Reply(write_x12(reply), kind, len(transactions), tuple(problems))


def _group_codes(group: X12FunctionalGroup) -> tuple[str, ...]:
    """AK905 codes: 3 GE missing, 4 GE02 ≠ GS06, 5 GE01 ≠ the transaction sets counted."""
    if group.ge is None:
        return ("3",)
    codes = []
    if group.gs is not None and group.ge.element(2).strip() != group.gs.element(6).strip():
        codes.append("4")
    if group.ge.element(1).strip() != str(len(group.transactions)):
        codes.append("5")
    return tuple(codes)


def _reply_interchange(
    transactions: list[X12TransactionSet], request: X12Interchange | None, control: int, now: datetime
) -> X12Interchange:
    """Sender and receiver swapped from the request (ISA and GS), our control numbers."""
    isa = request.isa if request is not None else None
    gs = next((g.gs for g in request.groups if g.gs is not None), None) if request is not None else None

    def isa_value(position: int, default: str) -> str:
        value = isa.element(position).strip() if isa is not None else ""
        return _plain(value) or default

    usage = isa_value(15, "P")
    return build_interchange(
        transactions,
        sender_id=isa_value(8, _SENDER),
        sender_qualifier=isa_value(7, "ZZ"),
        receiver_id=isa_value(6, "SUBMITTER"),
        receiver_qualifier=isa_value(5, "ZZ"),
        control_number=control % 1_000_000_000,
        group_control_number=control % 1_000_000_000,
        usage=usage if usage in ("P", "T") else "P",
        when=now,
        application_sender=_plain(gs.element(3).strip()) or None if gs is not None else None,
        application_receiver=_plain(gs.element(2).strip()) or None if gs is not None else None,
    )


def _plain(value: str) -> str:
    """An id from the request that fits our delimiters and widths (else empty, and a default is used)."""
    return value[:15] if value and not any(char in value for char in "*:^~") else ""


def _answer_270(
    transaction: X12TransactionSet, payer: PayerDefinition, now: datetime, _: Callable[[], str]
) -> list[Row]:
    return answer_270(transaction, payer, now=now)


def _answer_276(
    transaction: X12TransactionSet, payer: PayerDefinition, now: datetime, _: Callable[[], str]
) -> list[Row]:
    return answer_276(transaction, payer, now=now)


def _answer_278(
    transaction: X12TransactionSet, payer: PayerDefinition, now: datetime, number: Callable[[], str]
) -> list[Row]:
    return answer_278(transaction, payer, now=now, number=number)


_ANSWER: dict[str, Callable[[X12TransactionSet, PayerDefinition, datetime, Callable[[], str]], list[Row]]] = {
    "270": _answer_270,
    "276": _answer_276,
    "278": _answer_278,
}
