"""Reading and writing the HL7v2 sandbox's rows (`tables.py`), and routing by receiving facility.

`accept` is the one path an outbound message takes, over HTTP and MLLP alike: inspect it, refuse
it with its reason (`AE`/`AR`), or store it and answer `AA` — the ACK is built only after the row
is committed, so an `AA` always names a stored message and an `AE`/`AR` never left one behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, bindparam, func, insert, select
from sqlalchemy.orm import Session

from assay.core.state import Hl7Record
from assay.sandboxes.hl7.ack import UNKNOWN_KEY, Ack, Inspection, acknowledge, reject
from assay.sandboxes.hl7.tables import Hl7Facility, Hl7MessageRow
from assay.store import iso, new_id, utcnow
from assay.store.models import Sandbox, TaskRun

__all__ = [
    "Destination",
    "InboxMessage",
    "accept",
    "append",
    "destination",
    "inbox",
    "last_outbound",
    "outbound_until",
    "register_facility",
    "unroutable",
]


@dataclass(frozen=True, slots=True)
class InboxMessage:
    id: str
    message: str
    received_at: str | None


@dataclass(frozen=True, slots=True)
class Destination:
    """The sandbox a message is for, and whether its task run still takes traffic."""

    org_id: str
    task_run_id: str
    playground_id: str
    sandbox_id: str
    refusal: str | None
    """Why the task run takes no traffic (ended, past its deadline), or None."""


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
_DESTINATION = (
    select(
        Hl7Facility.org_id,
        Hl7Facility.task_run_id,
        Hl7Facility.playground_id,
        Hl7Facility.sandbox_id,
        TaskRun.phase,
        TaskRun.status,
        TaskRun.deadline_at,
    )
    .join(TaskRun, TaskRun.id == Hl7Facility.task_run_id)
    .where(Hl7Facility.facility == bindparam("facility"))
)
_LOCK = select(Sandbox.id).where(Sandbox.id == bindparam("sandbox_id")).with_for_update()
_LAST = select(func.max(Hl7MessageRow.seq)).where(
    Hl7MessageRow.sandbox_id == bindparam("sandbox_id"), Hl7MessageRow.direction == bindparam("direction")
)
_INSERT = insert(Hl7MessageRow)


def destination(conn: Connection, facility: str) -> Destination | None:
    """The sandbox whose credentials hold `facility` (MSH-6.1), or None when no task run has it."""
    row = conn.execute(_DESTINATION, {"facility": facility}).first()
    if row is None:
        return None
    refusal = None
    if (row.phase, row.status) != ("started", "active"):
        refusal = f"task run {row.task_run_id} is {row.phase}/{row.status}: it takes no messages"
    elif row.deadline_at is not None and row.deadline_at <= utcnow():
        refusal = f"task run {row.task_run_id} passed its deadline: it takes no messages"
    return Destination(row.org_id, row.task_run_id, row.playground_id, row.sandbox_id, refusal)


def append(conn: Connection, sandbox_id: str, direction: str, message: str, control_id: str | None) -> int:
    """Insert one message with the next `seq` of its direction; appends to one sandbox take turns
    on its row (PostgreSQL; SQLite's BEGIN IMMEDIATE already serializes)."""
    conn.execute(_LOCK, {"sandbox_id": sandbox_id})
    last = conn.execute(_LAST, {"sandbox_id": sandbox_id, "direction": direction}).scalar()
    seq = (last or 0) + 1
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
    return seq


def accept(conn: Connection, sandbox_id: str, inspection: Inspection, refusal: str | None = None) -> Ack:
    """Refuse the message (`AR` with `refusal`, or its own `AE`/`AR`), or store it and `AA`; the
    caller commits `conn`'s transaction before the ACK leaves."""
    if inspection.code == "AA" and refusal is not None:
        inspection = reject(inspection, refusal)
    if inspection.code == "AA":
        control = inspection.message.control_id.value if inspection.message is not None else None
        append(conn, sandbox_id, "outbound", inspection.text, control)
    return acknowledge(inspection)


def unroutable(inspection: Inspection, facility: str | None) -> Ack:
    """`AR` for a message whose MSH-6.1 names no task run's receiving facility."""
    named = f"receiving facility {facility!r} (MSH-6.1)" if facility else "no receiving facility (MSH-6.1)"
    return acknowledge(reject(inspection, f"{named} is not a started task run's", UNKNOWN_KEY))


def inbox(engine: Engine, sandbox_id: str) -> list[InboxMessage]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(Hl7MessageRow.id, Hl7MessageRow.message, Hl7MessageRow.received_at)
            .where(Hl7MessageRow.sandbox_id == sandbox_id, Hl7MessageRow.direction == "inbox")
            .order_by(Hl7MessageRow.seq)
        ).all()
    return [InboxMessage(row.id, row.message, iso(row.received_at)) for row in rows]


def last_outbound(session: Session, sandbox_id: str) -> int:
    found = session.execute(
        select(func.max(Hl7MessageRow.seq)).where(
            Hl7MessageRow.sandbox_id == sandbox_id, Hl7MessageRow.direction == "outbound"
        )
    ).scalar()
    return int(found or 0)


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
