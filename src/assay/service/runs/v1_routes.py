"""The public run API `/v1` (docs/api.md): create a run (Solver key or org key), read it (its run
token, its solver's key, or an org key), start and complete task runs (run token)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from assay.service.deps import (
    AnyCaller,
    GradingDep,
    RunCaller,
    RunCallerInTransaction,
    RunCreator,
    SessionDep,
    SettingsDep,
    TaskRunEventsFlushed,
    public_host,
)
from assay.service.errors import ERROR_RESPONSES, envelope
from assay.service.priority import served_first
from assay.service.runs import actions, queries
from assay.service.runs.schemas import (
    BenchmarkRunCreate,
    CompletionOut,
    V1BenchmarkRunOut,
    V1CreatedOut,
    V1StartedOut,
    V1TaskRunOut,
    completion_json,
    started_json,
    v1_benchmark_run_json,
    v1_created_json,
    v1_task_run_json,
)
from assay.service.transactions import TransactionRoute

__all__ = ["router"]

router = APIRouter(tags=["v1"], responses=ERROR_RESPONSES, route_class=TransactionRoute)
"""Handlers return `JSONResponse` themselves: these are the agent's hot path, and skipping
FastAPI's generic re-encoding of plain dicts saves a measurable share of each call."""


@router.post("/benchmark-runs", status_code=201, responses={201: {"model": V1CreatedOut}})
def create_benchmark_run(
    body: BenchmarkRunCreate, request: Request, session: SessionDep, caller: RunCreator
) -> JSONResponse:
    """Start a rollout of `slug@version` (or `slug`); returns the run's bearer token once."""
    created = actions.create_benchmark_run(session, caller, body)
    request.app.state.tokens.remember(created.token, created.benchmark_run)
    return JSONResponse(
        v1_created_json(created.benchmark_run, created.token, created.task_runs), status_code=201
    )


@router.get("/benchmark-runs/{benchmark_run_id}", responses={200: {"model": V1BenchmarkRunOut}})
def get_benchmark_run(benchmark_run_id: str, session: SessionDep, caller: AnyCaller) -> JSONResponse:
    return JSONResponse(
        v1_benchmark_run_json(*queries.settled_benchmark_run(session, caller, benchmark_run_id))
    )


@router.get("/task-runs/{task_run_id}", responses={200: {"model": V1TaskRunOut}})
def get_task_run(task_run_id: str, session: SessionDep, caller: AnyCaller) -> JSONResponse:
    """A task run's phase, status and result with its task `{id, name, task_item}` (docs/api.md);
    never its criteria. A run token reads only its own run's task runs."""
    return JSONResponse(v1_task_run_json(queries.settled_task_run(session, caller, task_run_id)))


async def _prepared(task_run_id: str, request: Request, caller: RunCaller) -> None:
    """On a worker thread of its own before the handler's transaction opens: the dataset layers
    are built and stored holding no lock (`actions.prepare_start`). Not at all once this worker
    prepared everything the run's tasks need (`actions.is_prepared`): no read, no thread."""
    if actions.is_prepared(caller.benchmark_run_id):
        return
    state = request.app.state
    await run_in_threadpool(actions.prepare_start, state.database, caller, task_run_id, state.deployment)


@router.post(
    "/task-runs/{task_run_id}/start",
    dependencies=[Depends(_prepared)],
    responses={200: {"model": V1StartedOut}},
)
@served_first
def start_task_run(
    task_run_id: str, request: Request, session: SessionDep, caller: RunCaller, settings: SettingsDep
) -> JSONResponse:
    """Provision the playground; idempotent while started. A failed provisioning is a 409 that
    still records the task run as `failed` (so the reply is built here, not raised)."""
    started = actions.start_task_run(
        session,
        caller,
        task_run_id,
        host=public_host(request, settings),
        deployment=request.app.state.deployment,
    )
    if started.failure or started.access is None:
        reason = started.failure or "provisioning failed"
        return envelope(409, "CONFLICT", f"task run {task_run_id} failed: {reason}", {"reason": reason})
    return JSONResponse(started_json(started.task_run, started.access))


@router.post(
    "/task-runs/{task_run_id}/complete",
    responses={200: {"model": CompletionOut, "description": "Result"}},
    dependencies=[TaskRunEventsFlushed],
)
@served_first
def complete_task_run(
    task_run_id: str,
    request: Request,
    session: SessionDep,
    caller: RunCallerInTransaction,
    grading: GradingDep,
) -> JSONResponse:
    """Verify now; idempotent. Scored runs omit `details` and `evidence` here."""
    result = actions.complete_task_run(session, caller, task_run_id, request.app.state.deployment, grading)
    return JSONResponse(completion_json(result.task_run, result.criterion_runs, scored=result.scored))
