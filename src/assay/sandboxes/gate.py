"""The write gate: a write racing `complete` either commits before the capture or is refused.

The rule, for every surface and both backends: an agent's write is stored and acknowledged only
if it commits before its task run's capture point, in the serialisation the capture uses; after
that point it is refused (`SandboxClosed`) and stored nowhere. So what the agent was told it did
is exactly what is graded, and `rescore`, the state tar.gz and `assay verify` read the same.

The serialisation is the sandbox row:

- a write, in its own transaction and before it reads or writes anything of its surface, takes the
  row's lock (`FOR UPDATE` on PostgreSQL; on SQLite `BEGIN IMMEDIATE` has already serialised the
  whole transaction), then — in a statement of its own, so PostgreSQL's READ COMMITTED reads what a
  `complete` that held the lock committed — checks that the sandbox is active and its task run
  started and before its deadline (`admit`);
- `complete` locks every sandbox row of the playground in one statement (`lock_playground`, in id
  order, the order the event writer locks them in), and only then, in the next statement, reads the
  surfaces' capture values; its teardown marks the rows `torn_down` in the same transaction.

A write that held the lock first commits before the capture reads, and is captured; a write that
waits for the lock finds the sandbox torn down, and is refused. The lock order is the one order
of the run lifecycle: benchmark run, task runs, sandboxes, then a surface's own rows (the FHIR
store row, the portal store row), so a write takes the sandbox row before its surface's rows.

System writes. A few writes are the sandbox's own record of what happened to it, not the agent's
acts: the phone line hanging up a call still open when the task run ends (`complete`, the
deadline, a cancel) writes the hang-up to the call's transcript. Such a write goes through the
gate in `system` mode: it takes the same lock in the same order and reads the same check, so it
serialises with the agent's writes and with the capture, but it is never refused, because it
happens *because* the task run stops taking the agent's writes — in the very transaction that ends
it (before the capture reads, so the graded transcript holds the hang-up) or in its teardown. It
must never be reachable from an agent's request: only the sandbox's lifecycle hooks pass `system`.

Each surface answers `SandboxClosed` in its own terms: HTTP surfaces 409 in the API's error
envelope naming the phase (it is a `Conflict`), FHIR an OperationOutcome 409, MLLP an `AR` whose
ERR-8 says why, SFTP a failure status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, bindparam, select
from sqlalchemy.orm import Session

from assay.store import Conflict, utcnow
from assay.store.driver import DriverTransaction
from assay.store.models import Playground, Sandbox, TaskRun

__all__ = ["SandboxClosed", "admit", "admit_surface", "check_of", "closed_reason", "lock_playground"]


class SandboxClosed(Conflict):
    """A write that reached its sandbox after the task run stopped taking writes (it ended, was
    captured, or passed its deadline): nothing of it was stored. `phase`/`status` are the task
    run's, as the lifecycle names them."""

    def __init__(self, reason: str, *, task_run_id: str | None, phase: str | None, status: str | None):
        details = {"task_run_id": task_run_id, "phase": phase, "status": status}
        super().__init__(reason, {key: value for key, value in details.items() if value is not None})
        self.reason = reason
        self.task_run_id = task_run_id
        self.phase = phase
        self.status = status


Db = Connection | DriverTransaction

_STATE = (
    Sandbox.status.label("sandbox_status"),
    TaskRun.id.label("task_run_id"),
    TaskRun.phase.label("task_run_phase"),
    TaskRun.status.label("task_run_status"),
    TaskRun.deadline_at.label("task_run_deadline"),
)
_BY_ID = Sandbox.id == bindparam("sandbox_id")
_BY_SURFACE = (Sandbox.playground_id == bindparam("playground_id"), Sandbox.type == bindparam("surface"))

# Built once: on the MLLP hot path building expressions cost more than running them.
_LOCK = select(Sandbox.id).where(_BY_ID).with_for_update()
_LOCK_SURFACE = select(Sandbox.id).where(*_BY_SURFACE).with_for_update()


def _checking(*where: Any, also: Any = ()) -> Select[Any]:
    return (
        select(*_STATE, *also)
        .select_from(Sandbox)
        .join(Playground, Playground.id == Sandbox.playground_id)
        .join(TaskRun, TaskRun.id == Playground.task_run_id)
        .where(*where)
    )


def check_of(*also: Any) -> Select[Any]:
    """The gate's check by `sandbox_id` plus the caller's own columns (a scalar subquery such as
    its log's last `seq`, bound by the same parameters), read in the same statement: build it once
    and pass it to `admit`. The extra columns run after the lock, so they read what is committed."""
    return _checking(_BY_ID, also=also)


_CHECK = check_of()
_CHECK_SURFACE = _checking(*_BY_SURFACE)


def _refusal(row: Any, what: str) -> SandboxClosed | None:
    """Why the row's sandbox takes no writes, as the exception to raise; None when it does."""
    if row is None:
        return SandboxClosed(
            f"{what} does not exist: it takes no writes", task_run_id=None, phase=None, status=None
        )
    task_run_id, phase, status = row.task_run_id, row.task_run_phase, row.task_run_status
    if (phase, status) != ("started", "active"):
        reason = f"task run {task_run_id} is {phase}/{status}: its surfaces take no writes"
        return SandboxClosed(reason, task_run_id=task_run_id, phase=phase, status=status)
    if row.sandbox_status != "active":
        reason = f"task run {task_run_id}'s sandbox is {row.sandbox_status}: it takes no writes"
        return SandboxClosed(reason, task_run_id=task_run_id, phase=phase, status=status)
    deadline: datetime | None = row.task_run_deadline
    if deadline is not None and deadline <= utcnow():
        reason = f"task run {task_run_id} passed its deadline: its surfaces take no writes"
        return SandboxClosed(reason, task_run_id=task_run_id, phase=phase, status=status)
    return None


def admit(
    conn: Db,
    sandbox_id: str,
    check: Select[Any] = _CHECK,
    params: dict[str, Any] | None = None,
    *,
    system: bool = False,
) -> Any:
    """Open the write on `sandbox_id` in `conn`'s transaction: lock the row, then check it in a
    statement of its own; the check's row (with the columns `check_of` added), or `SandboxClosed`.
    `system`: a system write (see above), refused only when the sandbox does not exist.

    Call it first in the write's transaction, before anything of the surface is read or locked."""
    values = {"sandbox_id": sandbox_id, **(params or {})}
    if conn.dialect.name != "sqlite":
        conn.execute(_LOCK, {"sandbox_id": sandbox_id})
    row = conn.execute(check, values).first()
    refused = _refusal(row, f"sandbox {sandbox_id}")
    if refused is not None and not (system and row is not None):
        raise refused
    return row


def admit_surface(conn: Connection, playground_id: str, surface: str) -> bool:
    """`admit` for the playground's sandbox of `surface` (a store that knows only its playground,
    as the FHIR store does); False, with nothing checked, when the playground has no such sandbox
    row (a store provisioned on its own, `assay fhir-server`)."""
    values = {"playground_id": playground_id, "surface": surface}
    if conn.dialect.name != "sqlite" and conn.execute(_LOCK_SURFACE, values).first() is None:
        return False
    row = conn.execute(_CHECK_SURFACE, values).first()
    if row is None:
        return False
    refused = _refusal(row, f"the {surface} sandbox of playground {playground_id}")
    if refused is not None:
        raise refused
    return True


def closed_reason(conn: Db, sandbox_id: str) -> str | None:
    """Why the sandbox takes no writes, read without its lock (for reads and for ending sessions:
    a write still goes through `admit`); None when it takes them."""
    refused = _refusal(conn.execute(_CHECK, {"sandbox_id": sandbox_id}).first(), f"sandbox {sandbox_id}")
    return None if refused is None else refused.reason


def lock_playground(session: Session, playground_id: str) -> list[Sandbox]:
    """`complete`'s side of the gate: every sandbox row of the playground, locked in id order in
    one statement (a write in flight commits first; later ones wait and find them torn down). The
    capture reads the surfaces' values in the next statement."""
    statement = select(Sandbox).where(Sandbox.playground_id == playground_id).order_by(Sandbox.id)
    return list(session.scalars(statement.with_for_update()))
