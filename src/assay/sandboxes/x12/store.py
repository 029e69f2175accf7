"""The clearinghouse's rows: the payer it answers as, and one exchange per request (docs/sandboxes.md,
docs/snapshots.md).

`exchange` is the whole write path of `POST x12/{270|276|278}`: the payer is read (parsed once
per sandbox and cached — the row never changes), then one transaction takes the sandbox's row
lock, numbers the exchange, computes the reply with that number as its control number and
inserts request and reply together — or, when the task run stopped taking writes, raises
`SandboxClosed` (`sandboxes/gate.py`) having stored nothing. The reply is computed before
anything is written, so a failure leaves no half-written record; concurrent requests to one
sandbox take turns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Select, bindparam, func, insert, select
from sqlalchemy.orm import Session

from assay.core.state import X12Record
from assay.formats.x12 import decode_x12
from assay.sandboxes.gate import admit, check_of
from assay.sandboxes.payer import PayerDefinition, PayerDefinitionInvalid, parse_payer
from assay.sandboxes.x12.engine import X12Reply, respond
from assay.sandboxes.x12.tables import X12Exchange, X12Payer
from assay.store import iso, new_id, utcnow

__all__ = [
    "EMPTY_PAYER",
    "Exchanged",
    "exchange",
    "last_seq",
    "merge_definitions",
    "payer_of",
    "records",
    "seed_payer",
]

EMPTY_PAYER = parse_payer({"payer": {"id": "ASSAYPAYER", "name": "Assay Payer"}})
"""The payer of a playground seeded with no x12 dataset: it knows no member (every 270 is AAA 75)."""

_LISTS = ("members", "claims", "authorization_rules")


def merge_definitions(definitions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several x12 datasets (environment's, then task's) as one payer: members, claims and rules
    appended in order (rules keep their order, so earlier datasets' rules are tried first), the
    last `payer` and `default_determination` given win."""
    merged: dict[str, Any] = {}
    for definition in definitions:
        for key, value in definition.items():
            if key in _LISTS and isinstance(value, list):
                merged[key] = [*merged.get(key, []), *value]
            else:
                merged[key] = value
    return merged


def seed_payer(session: Session, sandbox_id: str, definitions: Sequence[Mapping[str, Any]]) -> None:
    """Store the merged payer definition of the sandbox (validated again: it may predate a rule).

    Raises:
        PayerDefinitionInvalid: the merged definition does not validate.
    """
    if not definitions:
        return
    merged = merge_definitions(definitions)
    parse_payer(merged)
    session.execute(insert(X12Payer).values(sandbox_id=sandbox_id, definition=merged, created_at=utcnow()))


class _PayerCache:
    """Parsed payers by sandbox id (bounded): a payer row is written once at seeding."""

    def __init__(self, size: int = 256):
        self.size = size
        self.entries: OrderedDict[tuple[int, str], PayerDefinition] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, engine: Engine, sandbox_id: str) -> PayerDefinition:
        key = (id(engine), sandbox_id)
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                return found
        with engine.connect() as conn:
            raw = conn.execute(select(X12Payer.definition).where(X12Payer.sandbox_id == sandbox_id)).scalar()
        payer = EMPTY_PAYER if raw is None else parse_payer(raw)
        with self.lock:
            self.entries[key] = payer
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return payer


_PAYERS = _PayerCache()


def payer_of(engine: Engine, sandbox_id: str) -> PayerDefinition:
    """The sandbox's payer (the empty payer when it was seeded with no x12 dataset)."""
    try:
        return _PAYERS.get(engine, sandbox_id)
    except PayerDefinitionInvalid:  # stored by hand past validation: answer as a payer with no one
        return EMPTY_PAYER


@dataclass(frozen=True, slots=True)
class Exchanged:
    reply: X12Reply
    record_id: str
    seq: int


_ADMIT = check_of(
    select(func.max(X12Exchange.seq))
    .where(X12Exchange.sandbox_id == bindparam("sandbox_id"))
    .scalar_subquery()
    .label("last")
)
"""The write gate's check and the last exchange's number: one statement after the lock."""


def exchange(
    engine: Engine, *, read_engine: Engine, org_id: str, sandbox_id: str, endpoint: str, body: bytes
) -> Exchanged:
    """Answer one request and store it with its reply, numbered in arrival order; `SandboxClosed`
    once its task run takes no writes. The payer is read on `read_engine`, before the exchange's
    own transaction: written once at `start`, it needs no lock, and on SQLite its read takes no
    turn in the write queue."""
    payer = payer_of(read_engine, sandbox_id)
    request = decode_x12(body).replace("\x00", "\ufffd")  # PostgreSQL text holds no NUL
    record_id = new_id("x12_")
    with engine.begin() as conn:
        seq = 1 + (admit(conn, sandbox_id, _ADMIT).last or 0)
        now = utcnow()
        reply = respond(endpoint, body, payer, control_number=seq, now=now, used=_used(conn, sandbox_id))
        conn.execute(
            insert(X12Exchange).values(
                sandbox_id=sandbox_id,
                seq=seq,
                id=record_id,
                org_id=org_id,
                endpoint=endpoint,
                kind=reply.kind,
                request=request,
                response=reply.text,
                interchange_control=reply.control_number,
                received_at=now,
            )
        )
    return Exchanged(reply, record_id, seq)


def _used(conn: Connection, sandbox_id: str) -> Callable[[str], bool]:
    """Whether an exchange of the sandbox already sent an interchange control number; read in
    the exchange's transaction, under the sandbox's lock, so two requests reusing one number
    cannot both pass."""

    def used(control: str) -> bool:
        found = conn.execute(_USED, {"sandbox_id": sandbox_id, "control": control}).first()
        return found is not None

    return used


_USED = (
    select(X12Exchange.seq)
    .where(
        X12Exchange.sandbox_id == bindparam("sandbox_id"),
        X12Exchange.interchange_control == bindparam("control"),
    )
    .limit(1)
)


def last_seq(sandbox_id: str) -> Select[int]:
    """The sequence number of the sandbox's last exchange (NULL: none yet)."""
    return select(func.max(X12Exchange.seq)).where(X12Exchange.sandbox_id == sandbox_id)


def records(session: Session, sandbox_id: str, upto: int) -> list[X12Record]:
    """The exchanges at or below `upto`, oldest first, as the `x12-response` check reads them."""
    rows = session.execute(
        select(
            X12Exchange.seq,
            X12Exchange.id,
            X12Exchange.request,
            X12Exchange.response,
            X12Exchange.received_at,
        )
        .where(X12Exchange.sandbox_id == sandbox_id, X12Exchange.seq <= upto)
        .order_by(X12Exchange.seq)
    ).all()
    return [X12Record(row.seq, row.response, row.request, row.id, iso(row.received_at)) for row in rows]
