"""The sandbox surfaces of a started task run, under its run token (SPEC §5.2).

Each registered surface's router is mounted twice: `/v1/task-runs/{id}/<name>/...` reaches that
task run's sandbox; `/v1/benchmark-runs/{id}/<name>/...` reaches the single started task run of the
benchmark run (409 listing the started ids when none or several are). Once the task run has ended —
or its deadline passed — every surface answers 409, so the captured state is final (SPEC §1.1).

Resolving the caller uses its own short transaction, closed before the surface's work starts: the
stores take their own write locks, and on SQLite a request holding a second transaction open would
wait on itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.sandboxes import SURFACES, Deployment, SandboxHandle
from assay.sandboxes.surface import SurfaceTarget
from assay.service.auth.actions import authenticate
from assay.service.deps import limit_rate
from assay.service.runs import repository as repo
from assay.service.runs import states
from assay.store import Caller, Conflict, Database, Forbidden, NotFound, utcnow
from assay.store.models import Sandbox, TaskRun

__all__ = ["benchmark_run_target", "sandbox_routers", "task_run_target"]


def _run_caller(request: Request, session: Session, authorization: str | None) -> Caller:
    caller = limit_rate(request, authenticate(session, authorization))
    if caller.kind != "run":
        raise Forbidden("sandbox surfaces need the run token of the benchmark run")
    return caller


def _open(session: Session, deployment: Deployment, task_run: TaskRun, surface: str) -> SandboxHandle:
    """The `surface` sandbox of a task run whose surfaces take traffic, else 409."""
    if not states.is_running((task_run.phase, task_run.status)):
        raise Conflict(
            f"task run {task_run.id} is {task_run.phase}/{task_run.status}: its surfaces take no traffic"
        )
    if task_run.deadline_at is not None and task_run.deadline_at <= utcnow():
        raise Conflict(f"task run {task_run.id} passed its deadline: its surfaces take no traffic")
    row = session.execute(
        select(Sandbox.id, Sandbox.credentials).where(
            Sandbox.playground_id == task_run.playground_id, Sandbox.type == surface
        )
    ).first()
    if task_run.playground_id is None or row is None:
        raise Conflict(f"task run {task_run.id} has no {surface} sandbox")
    return SandboxHandle(
        deployment, task_run.org_id, task_run.id, task_run.playground_id, row.id, row.credentials or {}
    )


def task_run_target(surface: str) -> SurfaceTarget:
    """The dependency that resolves `/v1/task-runs/{task_run_id}/<surface>` to its sandbox."""

    def target(
        request: Request, task_run_id: str, authorization: Annotated[str | None, Header()] = None
    ) -> SandboxHandle:
        database: Database = request.app.state.database
        with database.transaction() as session:
            task_run = repo.get_task_run(session, _run_caller(request, session, authorization), task_run_id)
            return _open(session, request.app.state.deployment, task_run, surface)

    return target


def benchmark_run_target(surface: str) -> SurfaceTarget:
    """The dependency that resolves `/v1/benchmark-runs/{id}/<surface>` to the single started task
    run's sandbox."""

    def target(
        request: Request, benchmark_run_id: str, authorization: Annotated[str | None, Header()] = None
    ) -> SandboxHandle:
        database: Database = request.app.state.database
        with database.transaction() as session:
            caller = _run_caller(request, session, authorization)
            if caller.benchmark_run_id != benchmark_run_id:
                raise NotFound.of("benchmark run", benchmark_run_id)
            started = [
                task_run
                for task_run in repo.task_runs_of(session, benchmark_run_id)
                if states.is_running((task_run.phase, task_run.status))
            ]
            if len(started) != 1:
                ids = [task_run.id for task_run in started]
                which = ", ".join(ids) if ids else "none"
                raise Conflict(
                    f"benchmark run {benchmark_run_id} needs exactly one started task run for this "
                    f"surface; started: {which}",
                    {"started_task_run_ids": ids},
                )
            return _open(session, request.app.state.deployment, started[0], surface)

    return target


def sandbox_routers() -> list[tuple[APIRouter, str]]:
    """(router, prefix) pairs the app mounts: two per surface that has routes."""
    mounted: list[tuple[APIRouter, str]] = []
    for name, surface in SURFACES.items():
        for target, prefix in (
            (task_run_target(name), f"/v1/task-runs/{{task_run_id}}/{name}"),
            (benchmark_run_target(name), f"/v1/benchmark-runs/{{benchmark_run_id}}/{name}"),
        ):
            router = surface.router(target)
            if router is not None:
                mounted.append((router, prefix))
    return mounted
