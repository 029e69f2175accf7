"""A task run's playground: created at `start` with one sandbox per registered surface, described
to the agent, and torn down when the task run ends (docs/api.md, docs/sandboxes.md).

Credentials are random per task run and kept in each sandbox row; surfaces accept them only while
the task run is started.

What a surface writes outside the database while `start` seeds (the files tree) is removed again
when the start's transaction ends without committing — a later statement fails, the last slot is
taken meanwhile, the commit itself fails — as no row would name it (`Discarding`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, event, select, update
from sqlalchemy.orm import Session, SessionTransaction

from assay.sandboxes.registry import DISCARDING, LIFECYCLE, SURFACES
from assay.sandboxes.surface import Access, Deployment, Purge, RunContext, deployment_of
from assay.store import new_id, utcnow
from assay.store.models import Playground, Sandbox

log = logging.getLogger("assay.sandboxes")

__all__ = [
    "Provisioned",
    "describe",
    "provision",
    "purge_playgrounds",
    "sandboxes_of",
    "surface_endpoints",
    "teardown",
]


@dataclass(frozen=True, slots=True)
class Provisioned:
    """What `provision` wrote, kept referenced for the rest of `start`: the session's identity
    map holds rows weakly, and each row let go was read again (`seed`, `describe`)."""

    playground: Playground
    sandboxes: list[Sandbox]


def provision(run: RunContext) -> Provisioned:
    """A new, active playground for one task run with a sandbox row per registered surface; each
    row keeps what its surface's `provision` returns (credentials, settings its routes read)."""
    session, now = run.session, utcnow()
    playground = Playground(
        id=run.playground_id,
        org_id=run.org_id,
        task_run_id=run.task_run_id,
        status="active",
        created_at=now,
        updated_at=now,
    )
    session.add(playground)
    rows = [
        Sandbox(
            id=new_id("sbx_"),
            org_id=run.org_id,
            playground_id=playground.id,
            type=name,
            status="active",
            credentials=surface.provision(run),
            created_at=now,
        )
        for name, surface in SURFACES.items()
    ]
    session.add_all(rows)
    session.flush()
    if DISCARDING:
        _discard_unless_committed(run)
    return Provisioned(playground, sorted(rows, key=lambda row: row.id))


def _discard_unless_committed(run: RunContext) -> None:
    """Once the transaction `start` runs in ends, committed or not, let the `Discarding` surfaces
    remove what they wrote for the playground if it did not commit. Its end, not its rollback, is
    watched: a session closed without either ends it as well. The flush above has begun it."""
    session, watched = run.session, run.session.get_transaction()
    committed = False

    def on_commit(_session: Session) -> None:  # fires for the outermost transaction only
        nonlocal committed
        committed = True

    def on_end(_session: Session, transaction: SessionTransaction) -> None:
        if transaction is not watched or committed:
            return
        for name, surface in DISCARDING.items():
            try:
                surface.discard(run.playground_id, run.deployment)
            except Exception:  # this runs as the start's own error propagates: it must stay the one raised
                log.exception("surface %s could not discard playground %s", name, run.playground_id)

    event.listen(session, "after_commit", on_commit)
    event.listen(session, "after_transaction_end", on_end)


def sandboxes_of(
    session: Session, playground_id: str, known: Sequence[Sandbox] | None = None
) -> list[Sandbox]:
    """The playground's sandbox rows by id: `known` when the caller holds them (`Provisioned`)."""
    if known is not None:
        return list(known)
    return list(
        session.scalars(select(Sandbox).where(Sandbox.playground_id == playground_id).order_by(Sandbox.id))
    )


def surface_endpoints(base: str) -> dict[str, str]:
    """The live surfaces' endpoints under a task-run or benchmark-run base (docs/sandboxes.md)."""
    endpoints: dict[str, str] = {}
    for surface in SURFACES.values():
        endpoints.update(surface.endpoints(base))
    return endpoints


def describe(
    session: Session,
    playground: Playground,
    *,
    host: str,
    deployment: Deployment,
    sandboxes: Sequence[Sandbox] | None = None,
) -> Access:
    """Endpoints (URL paths, no trailing slash) and credentials of a started task run, for the
    surfaces that are live (docs/sandboxes.md): nothing is advertised that would answer 404.
    `sandboxes` are its rows when the caller holds them (`start`, which just wrote them)."""
    base = f"/v1/task-runs/{playground.task_run_id}"
    credentials: dict[str, object] = {}
    for sandbox in sandboxes_of(session, playground.id, sandboxes):
        surface = SURFACES.get(sandbox.type)
        if surface is not None:
            credentials.update(surface.credentials(sandbox, host, deployment))
    return Access(surface_endpoints(base), credentials)


def teardown(session: Session, playground_id: str | None, deployment: Deployment | None = None) -> None:
    """Mark the playground and its sandboxes torn down (surfaces refuse traffic from now on), then
    let each surface release what it holds (its `teardown`).

    Two set-based UPDATEs and no reads (this runs inside every `complete`) plus the surfaces' own.
    """
    if playground_id is None:
        return
    quiet = {"synchronize_session": False}
    session.execute(
        update(Playground)
        .where(Playground.id == playground_id)
        .values(status="torn_down", updated_at=utcnow())
        .execution_options(**quiet)
    )
    session.execute(
        update(Sandbox)
        .where(Sandbox.playground_id == playground_id)
        .values(status="torn_down")
        .execution_options(**quiet)
    )
    deployment = deployment or deployment_of(session.connection().engine)
    for surface in LIFECYCLE.values():
        surface.teardown(session, playground_id, deployment)


def purge_playgrounds(
    session: Session, task_run_ids: Sequence[str], deployment: Deployment | None = None
) -> None:
    """Delete the playgrounds of task runs that are being deleted, with everything their surfaces
    keep, in the caller's transaction: a playground still in use is torn down first (surfaces
    refuse its traffic from then on), each surface's `purge` deletes its own rows, and deleting
    the playground rows takes their sandboxes, sandbox events and the tables that name a sandbox
    by foreign key (the schema's `ON DELETE CASCADE`)."""
    if not task_run_ids:
        return
    found = session.execute(
        select(Playground.id, Playground.status).where(Playground.task_run_id.in_(task_run_ids))
    ).all()
    if not found:
        return
    deployment = deployment or deployment_of(session.connection().engine)
    for playground_id, status in found:
        if status != "torn_down":
            teardown(session, playground_id, deployment)
    playground_ids = [playground_id for playground_id, _ in found]
    sandbox_ids = list(session.scalars(select(Sandbox.id).where(Sandbox.playground_id.in_(playground_ids))))
    gone = Purge(session, playground_ids, sandbox_ids, deployment)
    for surface in SURFACES.values():
        surface.purge(gone)
    session.execute(
        delete(Playground)
        .where(Playground.id.in_(playground_ids))
        .execution_options(synchronize_session=False)
    )
