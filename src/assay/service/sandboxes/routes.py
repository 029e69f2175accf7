"""The FHIR surface of a started task run, under its run token (SPEC §5.2).

`/v1/task-runs/{id}/fhir/...` reaches that task run's playground; `/v1/benchmark-runs/{id}/fhir/...`
reaches the single started task run of the benchmark run (409 listing the started ids when none or
several are). Once the task run has ended — or its deadline passed — the surface answers 409, so
the captured state is final (SPEC §1.1).

Resolving the caller uses its own short transaction, closed before the FHIR work starts: the FHIR
store takes its own write lock, and on SQLite a request holding a second transaction open would
wait on itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.sandboxes import record_event
from assay.sandboxes.fhir import FhirSurface, SurfaceEvent, base_url_of, fhir_router
from assay.sandboxes.fhir.external import configured_external_fhir
from assay.sandboxes.fhir.store import embedded_fhir
from assay.service.auth.actions import authenticate
from assay.service.deps import limit_rate
from assay.service.runs import repository as repo
from assay.service.runs import states
from assay.store import Caller, Conflict, Database, Forbidden, NotFound, utcnow
from assay.store.models import Sandbox, TaskRun

__all__ = ["benchmark_run_fhir", "sandbox_routers", "task_run_fhir"]


def _run_caller(request: Request, session: Session, authorization: str | None) -> Caller:
    caller = limit_rate(request, authenticate(session, authorization))
    if caller.kind != "run":
        raise Forbidden("sandbox surfaces need the run token of the benchmark run")
    return caller


def _open(session: Session, task_run: TaskRun) -> tuple[str, str]:
    """(playground id, fhir sandbox id) of a task run whose surfaces take traffic, else 409."""
    if not states.is_running((task_run.phase, task_run.status)):
        raise Conflict(
            f"task run {task_run.id} is {task_run.phase}/{task_run.status}: its surfaces take no traffic"
        )
    if task_run.deadline_at is not None and task_run.deadline_at <= utcnow():
        raise Conflict(f"task run {task_run.id} passed its deadline: its surfaces take no traffic")
    sandbox_id = session.scalars(
        select(Sandbox.id).where(Sandbox.playground_id == task_run.playground_id, Sandbox.type == "fhir")
    ).first()
    if task_run.playground_id is None or sandbox_id is None:
        raise Conflict(f"task run {task_run.id} has no FHIR sandbox")
    return task_run.playground_id, sandbox_id


def _surface(request: Request, database: Database, task_run: TaskRun, where: tuple[str, str]) -> FhirSurface:
    playground_id, sandbox_id = where
    org_id = task_run.org_id

    def record(event: SurfaceEvent) -> None:
        record_event(
            database.engine,
            org_id=org_id,
            sandbox_id=sandbox_id,
            type="fhir_request",
            method=event.method,
            path=event.path,
            status=event.status,
            request=event.request,
            response=event.response,
        )

    fhir = embedded_fhir(database.engine)
    return FhirSurface(fhir, playground_id, base_url_of(request), record, configured_external_fhir())


def task_run_fhir(
    request: Request, task_run_id: str, authorization: Annotated[str | None, Header()] = None
) -> FhirSurface:
    database: Database = request.app.state.database
    with database.transaction() as session:
        task_run = repo.get_task_run(session, _run_caller(request, session, authorization), task_run_id)
        where = _open(session, task_run)
    return _surface(request, database, task_run, where)


def benchmark_run_fhir(
    request: Request, benchmark_run_id: str, authorization: Annotated[str | None, Header()] = None
) -> FhirSurface:
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
                f"benchmark run {benchmark_run_id} needs exactly one started task run for this surface; "
                f"started: {which}",
                {"started_task_run_ids": ids},
            )
        task_run = started[0]
        where = _open(session, task_run)
    return _surface(request, database, task_run, where)


def sandbox_routers() -> list[tuple[APIRouter, str]]:
    """(router, prefix) pairs the app mounts."""
    return [
        (fhir_router(task_run_fhir), "/v1/task-runs/{task_run_id}/fhir"),
        (fhir_router(benchmark_run_fhir), "/v1/benchmark-runs/{benchmark_run_id}/fhir"),
    ]
