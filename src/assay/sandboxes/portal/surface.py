"""The payer portal on the `Surface` seam (docs/sandboxes.md, docs/snapshots.md).

REST under `/v1/task-runs/{id}/portal/` (run token, the seam's target) and the web portal under
`…/portal/web/` — the task run's `credentials.portal.portal_url`. The pages take no run token (a
browser has none): they resolve the task run from the path and sign in with the portal
credentials; the portal sandbox row's status is the gate, so the pages close with every other
surface when the task run ends (teardown), and at its deadline.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter, Depends, Request
from sqlalchemy import Select, delete, select
from sqlalchemy.orm import Session

from assay.core.state import PortalRow, portal_digests
from assay.sandboxes.options import Option, not_negative
from assay.sandboxes.portal import actions
from assay.sandboxes.portal.access import PortalSurface
from assay.sandboxes.portal.datasets import check_portal_dataset
from assay.sandboxes.portal.routes import portal_router
from assay.sandboxes.portal.store import capture_seq, rows_at
from assay.sandboxes.portal.tables import PortalSessionRow, PortalStoreRow, PortalVersion
from assay.sandboxes.portal.throttle import SignInThrottle, ThrottleSettings
from assay.sandboxes.portal.tools import TOOLS
from assay.sandboxes.portal.web import portal_web_router
from assay.sandboxes.surface import (
    Deployment,
    LifecycleSurface,
    ProvisionFailed,
    Purge,
    RecordsView,
    RunContext,
    SandboxHandle,
    SurfaceTarget,
)
from assay.snapshot import SnapshotWriter
from assay.store import Conflict, DomainError, NotFound, utcnow
from assay.store.models import Playground, Sandbox, TaskRun

__all__ = ["PortalSandbox", "PortalView", "web_path"]


def web_path(task_run_id: str) -> str:
    """The web portal of a task run (`credentials.portal.portal_url`), a path like the endpoints."""
    return f"/v1/task-runs/{task_run_id}/portal/web"


class PortalView(RecordsView):
    """The captured rows, in insertion order; the baseline is the digests of the rows
    `start` seeded, None for a capture made before they were kept."""

    records: list[PortalRow]

    def write(self, writer: SnapshotWriter, record: PortalRow) -> None:
        writer.add_portal_row(record)

    def digests(self) -> dict[str, str]:
        return portal_digests(self.records)

    def portal_rows(self, resource: str, portal: str | None = None) -> Sequence[PortalRow]:
        return [
            row
            for row in self.records
            if row.resource == resource and (portal is None or row.portal == portal)
        ]


def _set_portal_row(run: RunContext, sandbox: Sandbox, step: Mapping[str, Any]) -> None:
    """`set_portal_row {resource, row, portal?}` (docs/sandboxes.md)."""
    resource = step.get("resource")
    if not isinstance(resource, str):
        raise ProvisionFailed("set_portal_row needs a resource")
    try:
        actions.set_row(
            run.session.connection(), run.playground_id, step.get("portal"), resource, step.get("row")
        )
    except DomainError as exc:
        raise ProvisionFailed(f"set_portal_row {resource}: {exc.message}") from None
    _mark_seeded(run, sandbox)


_SEEDED_SEQ = "seeded_seq"
"""Kept in the portal sandbox row: the store's last sequence number written by `start` (datasets
and `set_portal_row` steps), the seeded baseline `no-unexpected-changes` compares with."""


def _mark_seeded(run: RunContext, sandbox: Sandbox) -> None:
    seq = run.session.execute(capture_seq(run.playground_id)).scalar()
    sandbox.credentials = {**(sandbox.credentials or {}), _SEEDED_SEQ: seq}


_DEFAULTS = ThrottleSettings()
_THROTTLE = "portal.sign_in"
"""Where a deployment keeps its sign-in throttle (`Deployment.runtime`)."""


def _throttle_of(deployment: Deployment) -> SignInThrottle:
    found = deployment.runtime.get(_THROTTLE)
    if found is None:
        settings = ThrottleSettings(
            deployment.option("portal", "sign_in_free_failures", _DEFAULTS.free_failures),
            deployment.option("portal", "sign_in_backoff", _DEFAULTS.backoff),
            deployment.option("portal", "sign_in_backoff_max", _DEFAULTS.max_backoff),
        )
        found = deployment.runtime.setdefault(_THROTTLE, SignInThrottle(settings))
    return found  # type: ignore[no-any-return]


def _web_target(request: Request) -> PortalSurface:
    """The portal of the task run in the path, while its sandbox is active and before its deadline."""
    task_run_id = request.path_params.get("task_run_id")
    if not isinstance(task_run_id, str):
        raise NotFound("the web portal is at credentials.portal.portal_url (/v1/task-runs/{id}/portal/web)")
    deployment: Deployment = request.app.state.deployment
    with deployment.read_engine.connect() as conn:
        found = conn.execute(
            select(
                Sandbox.id, Sandbox.org_id, Sandbox.playground_id, Sandbox.status, Sandbox.credentials,
                TaskRun.phase, TaskRun.status.label("run_status"), TaskRun.deadline_at,
            )
            .join(Playground, Playground.id == Sandbox.playground_id)
            .join(TaskRun, TaskRun.id == Playground.task_run_id)
            .where(TaskRun.id == task_run_id, Sandbox.type == "portal")
        ).first()  # fmt: skip
    if found is None:
        raise NotFound.of("task run", task_run_id)
    if found.status != "active" or (found.phase, found.run_status) != ("started", "active"):
        raise Conflict(
            f"task run {task_run_id} is {found.phase}/{found.run_status}: its portal takes no traffic"
        )
    if found.deadline_at is not None and found.deadline_at <= utcnow():
        raise Conflict(f"task run {task_run_id} passed its deadline: its portal takes no traffic")
    return PortalSurface(
        deployment.engine, deployment.read_engine, found.org_id, found.playground_id, found.id,
        dict(found.credentials or {}), task_run_id, web_path(task_run_id), _throttle_of(deployment),
    )  # fmt: skip


class PortalSandbox(LifecycleSurface):
    tools = TOOLS
    name = "portal"
    options = MappingProxyType(
        {  # ASSAY_PORTAL_SIGN_IN_*: docs/deployment.md
            "sign_in_free_failures": Option(int, _DEFAULTS.free_failures, check=not_negative),
            "sign_in_backoff": Option(float, _DEFAULTS.backoff, check=not_negative),
            "sign_in_backoff_max": Option(float, _DEFAULTS.max_backoff, check=not_negative),
        }
    )
    dataset_type = "portal"
    scenario_steps = {"set_portal_row": _set_portal_row}
    state_fields = frozenset({"portal_rows"})

    def purge(self, gone: Purge) -> None:
        for table in (PortalVersion, PortalSessionRow, PortalStoreRow):
            gone.session.execute(delete(table).where(table.playground_id.in_(gone.playground_ids)))

    def open(self, deployment: Deployment) -> None:
        _throttle_of(deployment)

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        problems = check_portal_dataset(data)
        return {".".join(filter(None, ("data", key))): messages for key, messages in problems.items()}

    def provision(self, run: RunContext) -> dict[str, Any] | None:
        """The web portal's credentials, random per task run (docs/sandboxes.md)."""
        suffix = run.task_run_id.removeprefix("tr_")[-10:].lower()
        return {
            "username": f"agent-{suffix}",
            "password": secrets.token_urlsafe(18),
            "task_run_id": run.task_run_id,
        }

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        seq = actions.seed_portal(run.session.connection(), run.playground_id, datasets)
        sandbox.credentials = {**(sandbox.credentials or {}), _SEEDED_SEQ: seq}

    def credentials(self, sandbox: Sandbox, host: str, deployment: Deployment) -> dict[str, Any]:
        saved = sandbox.credentials or {}
        return {
            "portal": {
                "portal_url": web_path(str(saved.get("task_run_id"))),
                "username": saved.get("username"),
                "password": saved.get("password"),
            }
        }

    def router(self, target: SurfaceTarget) -> APIRouter:
        # `= Depends(...)`, not `Annotated[...]`: the local `target` is not in the module's globals.
        def rest(request: Request, handle: SandboxHandle = Depends(target)) -> PortalSurface:
            surface = PortalSurface(
                handle.deployment.engine, handle.deployment.read_engine, handle.org_id, handle.playground_id, handle.sandbox_id,
                dict(handle.credentials), handle.task_run_id,
            )  # fmt: skip
            request.state.portal_surface = surface
            return surface

        router = APIRouter()
        router.include_router(portal_web_router(_web_target), prefix="/web")  # before `/{resource}/{key}`
        router.include_router(portal_router(rest))
        return router

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any]:
        return capture_seq(playground_id)

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        if read is None:
            return None
        pointer = {"playground_id": playground_id, "seq": int(read)}
        sandbox = session.get(Sandbox, sandbox_id)  # loaded by `capture` already: no SQL
        saved = sandbox.credentials if sandbox is not None else None
        seeded = saved.get(_SEEDED_SEQ) if isinstance(saved, dict) else None
        if isinstance(seeded, int):
            pointer[_SEEDED_SEQ] = seeded
        return pointer

    def read(self, pointer: Any, session: Session | None) -> PortalView:
        if session is None or not isinstance(pointer, dict):
            return PortalView()
        connection, playground_id = session.connection(), str(pointer["playground_id"])
        seeded_seq = pointer.get(_SEEDED_SEQ)
        seeded = rows_at(connection, playground_id, seeded_seq) if isinstance(seeded_seq, int) else None
        baseline = None if seeded is None else portal_digests(seeded)
        return PortalView(rows_at(connection, playground_id, int(pointer["seq"])), baseline)
