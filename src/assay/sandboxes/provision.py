"""Creating a playground: one row per surface, with per-task-run credentials (SPEC §1, §5.2).

Credentials are random per task run; they are meant to be valid only while it is started (the
listeners that check them arrive with the sandbox surfaces).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event, select, update
from sqlalchemy.orm import Session

from assay.sandboxes.fhir.external import SPACE_KEY, IsolatedFhir, configured_external_fhir, recorded_space
from assay.sandboxes.fhir.store import embedded_fhir
from assay.sandboxes.settings import fhir_sandbox_settings
from assay.store import new_id, utcnow
from assay.store.models import Playground, Sandbox, TaskRun

__all__ = ["SURFACES", "Access", "close_space", "describe", "provision", "surface_endpoints", "teardown"]

log = logging.getLogger("assay.sandboxes")

SURFACES = ("fhir", "hl7", "x12", "files", "portal", "voice")


@dataclass(frozen=True, slots=True)
class Access:
    endpoints: dict[str, str]
    credentials: dict[str, Any]


def _credentials(surface: str, task_run_id: str) -> dict[str, Any] | None:
    suffix = task_run_id.removeprefix("tr_")[-10:].lower()
    if surface == "files":
        return {"username": f"tr-{suffix}", "password": secrets.token_urlsafe(18)}
    if surface == "hl7":
        return {"receiving_facility": f"ASSAY-{suffix.upper()}"}
    if surface == "portal":
        return {"username": f"agent-{suffix}", "password": secrets.token_urlsafe(18)}
    return None


def provision(session: Session, *, org_id: str, task_run_id: str) -> Playground:
    """A new, active playground for one task run with a sandbox per surface.

    The `fhir` sandbox row keeps the environment's FHIR settings its surface needs (strict
    validation); the others keep their credentials.
    """
    now = utcnow()
    task_run = session.get(TaskRun, task_run_id)
    fhir_settings = fhir_sandbox_settings(session, task_run) if task_run is not None else None
    playground = Playground(
        id=new_id("pg_"),
        org_id=org_id,
        task_run_id=task_run_id,
        status="active",
        created_at=now,
        updated_at=now,
    )
    session.add(playground)
    session.add_all(
        Sandbox(
            id=new_id("sbx_"),
            org_id=org_id,
            playground_id=playground.id,
            type=surface,
            status="active",
            credentials=fhir_settings if surface == "fhir" else _credentials(surface, task_run_id),
            created_at=now,
        )
        for surface in SURFACES
    )
    session.flush()
    return playground


def sandboxes_of(session: Session, playground_id: str) -> list[Sandbox]:
    return list(
        session.scalars(select(Sandbox).where(Sandbox.playground_id == playground_id).order_by(Sandbox.id))
    )


def surface_endpoints(base: str) -> dict[str, str]:
    """The seven sandbox surfaces under a task-run or benchmark-run base (SPEC §5.2)."""
    return {
        "fhir": f"{base}/fhir",
        "hl7_inbox": f"{base}/hl7/inbox",
        "hl7_outbound": f"{base}/hl7/outbound",
        "files": f"{base}/files",
        "portal": f"{base}/portal",
        "x12": f"{base}/x12",
        "voice": f"{base}/voice",
    }


def describe(
    session: Session, playground: Playground, *, host: str, sftp_port: int = 2222, mllp_port: int = 2575
) -> Access:
    """Endpoints (URL paths, no trailing slash) and credentials of a started task run (SPEC §5.2)."""
    base = f"/v1/task-runs/{playground.task_run_id}"
    creds = {sandbox.type: sandbox.credentials or {} for sandbox in sandboxes_of(session, playground.id)}
    endpoints = surface_endpoints(base)
    credentials = {
        "sftp": {"host": host, "port": sftp_port, **creds.get("files", {})},
        "hl7": {"host": host, "port": mllp_port, **creds.get("hl7", {})},
        "portal": {"portal_url": endpoints["portal"], **creds.get("portal", {})},
    }
    return Access(endpoints, credentials)


def teardown(session: Session, playground_id: str | None) -> None:
    """Mark the playground and its sandboxes torn down: surfaces refuse traffic from now on.

    Two set-based UPDATEs and no reads (this runs inside every `complete`), plus, for a playground
    with its own space on an external FHIR server, one read of its `fhir` sandbox row and the
    space's deletion once the transaction has committed — after the capture, which `complete`
    stored in the same transaction; a rolled-back `complete` leaves the space as it was.
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
    embedded_fhir(session.connection().engine).forget(playground_id)
    external = configured_external_fhir()
    if isinstance(external, IsolatedFhir):
        _close_after_commit(session, external, playground_id)


def _close_after_commit(session: Session, external: IsolatedFhir, playground_id: str) -> None:
    connection = session.connection()
    recorded = recorded_space(connection, playground_id)
    if recorded is None:
        return
    if (recorded.get("isolation"), recorded.get("server")) != (external.spaces.isolation, external.base_url):
        log.warning(
            "playground %s has a space on %s (%s), not on the configured FHIR server: left in place",
            playground_id, recorded.get("server"), recorded.get("isolation"),
        )  # fmt: skip
        return
    engine = connection.engine
    event.listen(
        session, "after_commit", lambda _: close_space(engine, external, playground_id, recorded), once=True
    )


def close_space(
    engine: Engine, external: IsolatedFhir, playground_id: str, recorded: Mapping[str, Any]
) -> None:
    """Delete a playground's space on the external server; never raises.

    A failure must not fail the `complete` (or cancel, or timeout) that ended the task run — its
    result is committed by now — so it is logged, and kept as `close_error` beside the space in
    the `fhir` sandbox row, where an operator can find spaces left on the server.
    """
    try:
        external.close(playground_id, recorded)
    except Exception as exc:
        log.warning("could not delete the FHIR space of playground %s: %s", playground_id, exc)
        _note_close_error(engine, playground_id, recorded, str(exc)[:1000])


def _note_close_error(engine: Engine, playground_id: str, recorded: Mapping[str, Any], error: str) -> None:
    try:
        with engine.begin() as conn:
            row = conn.execute(
                select(Sandbox.id, Sandbox.credentials).where(
                    Sandbox.playground_id == playground_id, Sandbox.type == "fhir"
                )
            ).first()
            if row is None:
                return
            credentials = {**(row.credentials or {}), SPACE_KEY: {**recorded, "close_error": error}}
            conn.execute(update(Sandbox).where(Sandbox.id == row.id).values(credentials=credentials))
    except Exception:
        log.exception("could not record the failed deletion of playground %s's FHIR space", playground_id)
