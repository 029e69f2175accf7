"""Reading and writing the HL7v2 sandbox's rows (`tables.py`), and routing by receiving facility.

`accept` is the one path an outbound message takes, over HTTP and MLLP alike: inspect it, refuse
it with its reason (`AE`/`AR`), or store it and answer `AA` — the ACK is built only after the row
is committed, so an `AA` always names a stored message and an `AE`/`AR` never left one behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, Select, bindparam, func, insert, select
from sqlalchemy.orm import Session

from assay.core.state import Hl7Record
from assay.sandboxes.gate import SandboxClosed, admit, check_of
from assay.sandboxes.hl7.ack import UNKNOWN_KEY, Ack, Inspection, acknowledge, reject
from assay.sandboxes.hl7.tables import Hl7Facility, Hl7MessageRow
from assay.store import iso, new_id, utcnow
from assay.store.driver import DriverTransaction
from assay.store.models import Sandbox

__all__ = [
    "InboxMessage",
    "Route",
    "accept",
    "append",
    "deliver",
    "inbox",
    "last_outbound",
    "outbound_until",
    "register_facility",
    "route",
    "unroutable",
]


@dataclass(frozen=True, slots=True)
class InboxMessage:
    id: str
    message: str
    received_at: str | None


@dataclass(frozen=True, slots=True)
class Route:
    """The sandbox a receiving facility's messages go to. It never changes: `start` writes the
    `hl7_facilities` row once and nothing updates or deletes it, so the listener may cache it;
    whether the task run still takes traffic is read with every message (`deliver`)."""

    org_id: str
    task_run_id: str
    playground_id: str
    sandbox_id: str


def register_facility(session: Session, facility: str, sandbox: Sandbox, task_run_id: str) -> None:
    session.add(
        Hl7Facility(
            facility=facility,
            sandbox_id=sandbox.id,
            task_run_id=task_run_id,
            org_id=sandbox.org_id,
            playground_id=sandbox.playground_id,
        )
    )


# Built once: on the MLLP hot path, building SQLAlchemy expressions per message cost more than
# running them (docs/performance.md, "MLLP").
_ROUTE = select(
    Hl7Facility.org_id, Hl7Facility.task_run_id, Hl7Facility.playground_id, Hl7Facility.sandbox_id
).where(Hl7Facility.facility == bindparam("facility"))
_LOCK = select(Sandbox.id).where(Sandbox.id == bindparam("sandbox_id")).with_for_update()
_LAST = select(func.max(Hl7MessageRow.seq)).where(
    Hl7MessageRow.sandbox_id == bindparam("sandbox_id"), Hl7MessageRow.direction == bindparam("direction")
)
_ADMIT = check_of(_LAST.scalar_subquery().label("last"))
"""The write gate's check and the last outbound `seq`: one statement after the lock."""
_INSERT = insert(Hl7MessageRow)


def route(conn: Connection | DriverTransaction, facility: str) -> Route | None:
    """The sandbox whose credentials hold `facility` (MSH-6.1), or None when no task run has it."""
    row = conn.execute(_ROUTE, {"facility": facility}).first()
    return None if row is None else Route(row.org_id, row.task_run_id, row.playground_id, row.sandbox_id)


def _take_turn(conn: Connection | DriverTransaction, sandbox_id: str) -> None:
    """Appends to one sandbox take turns on its row (PostgreSQL; SQLite's BEGIN IMMEDIATE already
    serializes them, and it has no FOR UPDATE to run)."""
    if conn.dialect.name != "sqlite":
        conn.execute(_LOCK, {"sandbox_id": sandbox_id})


def _insert(
    conn: Connection | DriverTransaction,
    sandbox_id: str,
    direction: str,
    seq: int,
    message: str,
    control_id: str | None,
) -> None:
    row = {
        "sandbox_id": sandbox_id,
        "direction": direction,
        "seq": seq,
        "id": new_id("hl7_"),
        "message": message,
        "control_id": control_id,
        "received_at": utcnow(),
    }
    conn.execute(_INSERT, [row])


def append(conn: Connection, sandbox_id: str, direction: str, message: str, control_id: str | None) -> int:
    """Insert one message with the next `seq` of its direction."""
    _take_turn(conn, sandbox_id)
    last = conn.execute(_LAST, {"sandbox_id": sandbox_id, "direction": direction}).scalar()
    seq = (last or 0) + 1
    _insert(conn, sandbox_id, direction, seq, message, control_id)
    return seq


def _control(inspection: Inspection) -> str | None:
    return inspection.message.control_id.value if inspection.message is not None else None


def accept(conn: Connection | DriverTransaction, sandbox_id: str, inspection: Inspection) -> Ack:
    """Refuse the message (its own `AE`/`AR`), or store it and `AA`; the caller commits `conn`'s
    transaction before the ACK leaves. A message that would be stored goes through the write gate
    (`sandboxes/gate.py`) first: the gate's check and the last `seq` are one read, after the
    sandbox's lock. `SandboxClosed` when the task run takes no writes (HTTP answers 409; MLLP,
    `deliver`, an `AR`)."""
    if inspection.code == "AA":
        row = admit(conn, sandbox_id, _ADMIT, {"direction": "outbound"})
        _insert(conn, sandbox_id, "outbound", (row.last or 0) + 1, inspection.text, _control(inspection))
    return acknowledge(inspection)


def deliver(conn: Connection | DriverTransaction, where: Route, inspection: Inspection) -> Ack:
    """`accept` for the MLLP listener: a message its task run can no longer take is `AR`, ERR-8
    saying why (ended, past its deadline), and stores nothing."""
    try:
        return accept(conn, where.sandbox_id, inspection)
    except SandboxClosed as closed:
        return acknowledge(reject(inspection, closed.reason))


def unroutable(inspection: Inspection, facility: str | None) -> Ack:
    """`AR` for a message whose MSH-6.1 names no task run's receiving facility."""
    named = f"receiving facility {facility!r} (MSH-6.1)" if facility else "no receiving facility (MSH-6.1)"
    reason = f"{named} belongs to no started task run; use the receiving_facility that start returned"
    return acknowledge(reject(inspection, reason, UNKNOWN_KEY))


def inbox(engine: Engine, sandbox_id: str) -> list[InboxMessage]:
    """The messages delivered to the sandbox, oldest first; `engine` may be a read-only one."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(Hl7MessageRow.id, Hl7MessageRow.message, Hl7MessageRow.received_at)
            .where(Hl7MessageRow.sandbox_id == sandbox_id, Hl7MessageRow.direction == "inbox")
            .order_by(Hl7MessageRow.seq)
        ).all()
    return [InboxMessage(row.id, row.message, iso(row.received_at)) for row in rows]


def last_outbound(sandbox_id: str) -> Select[int]:
    """The sequence number of the sandbox's last accepted outbound message (NULL: none yet)."""
    return select(func.max(Hl7MessageRow.seq)).where(
        Hl7MessageRow.sandbox_id == sandbox_id, Hl7MessageRow.direction == "outbound"
    )


def outbound_until(session: Session, sandbox_id: str, seq: int) -> Sequence[Hl7Record]:
    """The accepted outbound messages at or below `seq`, in arrival order."""
    rows = session.execute(
        select(Hl7MessageRow.seq, Hl7MessageRow.message, Hl7MessageRow.received_at)
        .where(
            Hl7MessageRow.sandbox_id == sandbox_id,
            Hl7MessageRow.direction == "outbound",
            Hl7MessageRow.seq <= seq,
        )
        .order_by(Hl7MessageRow.seq)
    ).all()
    return [Hl7Record(row.seq, row.message, None, iso(row.received_at)) for row in rows]
