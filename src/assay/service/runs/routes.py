"""Internal run endpoints (org API key, docs/api.md): the drill-down benchmark run → task run →
criterion run, cancel, rescore, playgrounds, events and the captured state as tar.gz.

Lists are newest first, except event lists: oldest first (docs/api.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from assay.core.statistics import compare_paired
from assay.sandboxes.provision import sandboxes_of
from assay.service.deps import (
    GradingDep,
    OrgCaller,
    OrgCallerInTransaction,
    PageDep,
    SandboxEventsFlushed,
    SessionDep,
    TaskRunEventsFlushed,
)
from assay.service.errors import ERROR_RESPONSES
from assay.service.pages import list_json
from assay.service.priority import served_first
from assay.service.runs import actions, overrides, queries
from assay.service.runs.overrides import OverrideCreate
from assay.service.runs.schemas import (
    BenchmarkRunCreate,
    CompletionOut,
    benchmark_run_json,
    completion_json,
    criterion_run_json,
    playground_json,
    task_run_json,
    trials_by_task,
)
from assay.service.transactions import TransactionRoute
from assay.store import Conflict, Invalid, iso
from assay.store.models import BenchmarkRun, CriterionRun, SandboxEvent, TaskRun

__all__ = ["router"]

router = APIRouter(responses=ERROR_RESPONSES, route_class=TransactionRoute)
Json = dict[str, Any]


@router.get("/benchmark-runs", tags=["benchmark-runs"])
def list_benchmark_runs(
    session: SessionDep,
    caller: OrgCaller,
    page: PageDep,
    benchmark_id: Annotated[str | None, Query()] = None,
    self_tests: Annotated[
        bool, Query(description="Also list self-test runs (agent `assay self-test`: lint and publish checks)")
    ] = False,
) -> Json:
    """Benchmark runs, newest first; self-test runs only with `self_tests=true` (they are an
    author's checks, not an agent's results)."""
    statement = queries.benchmark_runs_listed(caller, benchmark_id, self_tests=self_tests)
    return list_json(session, statement, BenchmarkRun, page, benchmark_run_json)


@router.post("/benchmark-runs", status_code=201, tags=["benchmark-runs"])
def create_benchmark_run(
    body: BenchmarkRunCreate, request: Request, session: SessionDep, caller: OrgCaller
) -> Json:
    """Create a run of the draft (`benchmark_id`) or a published version; the token is shown once."""
    created = actions.create_benchmark_run(session, caller, body)
    request.app.state.tokens.remember(created.token, created.benchmark_run)
    return {**benchmark_run_json(created.benchmark_run, created.task_runs), "bearer_token": created.token}


@router.get("/benchmark-runs/compare", tags=["benchmark-runs"])
def compare_benchmark_runs(
    session: SessionDep,
    caller: OrgCaller,
    a: Annotated[str, Query(description="benchmark run id")],
    b: Annotated[str, Query(description="benchmark run id of the same benchmark")],
) -> Json:
    """A minus B per task (trials averaged), the difference of means with its 95% interval, and
    whether it exceeds the noise (the interval leaves out 0)."""
    runs = {key: queries.settled_benchmark_run(session, caller, ident) for key, ident in (("a", a), ("b", b))}
    (run_a, task_runs_a), (run_b, task_runs_b) = runs["a"], runs["b"]
    if run_a.benchmark_id != run_b.benchmark_id:
        raise Invalid({"b": [f"benchmark run {b} is of another benchmark than {a}"]})
    unfinished = [run.id for run, _ in runs.values() if run.phase != "completed"]
    if unfinished:
        raise Conflict(f"benchmark run {unfinished[0]} has not completed; compare finished runs")
    comparison = compare_paired(trials_by_task(task_runs_a), trials_by_task(task_runs_b))
    names = {tr.task_id: tr.name for tr in [*task_runs_a, *task_runs_b]}
    return {
        "a": benchmark_run_json(run_a),
        "b": benchmark_run_json(run_b),
        **comparison.as_json(),
        "task_names": {task_id: names[task_id] for task_id in comparison.differences},
    }


@router.get("/benchmark-runs/{benchmark_run_id}", tags=["benchmark-runs"])
def get_benchmark_run(benchmark_run_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    run, task_runs = queries.settled_benchmark_run(session, caller, benchmark_run_id)
    body = benchmark_run_json(run, task_runs)
    counts = queries.overrides_in_force(session, [task_run.id for task_run in task_runs])
    for task_run in body["task_runs"]:
        task_run["overrides"] = counts.get(task_run["id"], 0)
    body["overrides"] = sum(counts.values())
    return body


@router.post("/benchmark-runs/{benchmark_run_id}/cancel", tags=["benchmark-runs"])
def cancel_benchmark_run(benchmark_run_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    run, task_runs = actions.cancel_benchmark_run(session, caller, benchmark_run_id)
    return benchmark_run_json(run, task_runs)


@router.get("/task-runs", tags=["task-runs"])
def list_task_runs(
    session: SessionDep,
    caller: OrgCaller,
    page: PageDep,
    benchmark_run_id: Annotated[str | None, Query()] = None,
) -> Json:
    statement = queries.task_runs_listed(caller, benchmark_run_id)
    return list_json(session, statement, TaskRun, page, lambda row: task_run_json(row, snapshot=False))


@router.get("/task-runs/{task_run_id}", tags=["task-runs"])
def get_task_run(task_run_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    """Verdict, score, axes, the frozen `snapshot` and the current criterion runs (docs/api.md)."""
    task_run = queries.settled_task_run(session, caller, task_run_id)
    return task_run_json(task_run, queries.current_criterion_runs(session, task_run.id))


@router.post("/task-runs/{task_run_id}/cancel", tags=["task-runs"])
def cancel_task_run(task_run_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    task_run = actions.cancel_task_run(session, caller, task_run_id)
    return task_run_json(task_run, queries.current_criterion_runs(session, task_run.id))


@router.post(
    "/task-runs/{task_run_id}/rescore",
    tags=["task-runs"],
    response_model=None,
    responses={200: {"model": CompletionOut, "description": "Result"}},
)
@served_first
def rescore_task_run(
    task_run_id: str,
    session: SessionDep,
    caller: OrgCallerInTransaction,
    grading: GradingDep,
    rejudge: Annotated[
        bool, Query(description="Ask the LLM judge again instead of replaying its recorded verdicts")
    ] = False,
) -> Json:
    """Score the stored capture again; the same body as `complete`. Recorded LLM-judge verdicts
    are replayed unless `rejudge=true`."""
    result = actions.rescore_task_run(session, caller, task_run_id, grading, rejudge=rejudge)
    return completion_json(result.task_run, result.criterion_runs, scored=result.scored)


@router.get(
    "/task-runs/{task_run_id}/state",
    tags=["task-runs"],
    response_class=Response,
    responses={
        200: {
            "description": "The snapshot, a tar.gz",
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
def get_task_run_state(task_run_id: str, session: SessionDep, caller: OrgCaller) -> Response:
    """The captured state as a snapshot tar.gz, readable by `assay verify`."""
    task_run = queries.get_task_run(session, caller, task_run_id)
    headers = {"Content-Disposition": f'attachment; filename="{task_run.id}.tar.gz"'}
    return Response(queries.state_archive(session, task_run), media_type="application/gzip", headers=headers)


@router.get("/task-runs/{task_run_id}/events", tags=["task-runs"], dependencies=[TaskRunEventsFlushed])
def list_task_run_events(task_run_id: str, session: SessionDep, caller: OrgCaller, page: PageDep) -> Json:
    statement = queries.playground_events_listed(caller, queries.get_task_run(session, caller, task_run_id))
    return list_json(session, statement, SandboxEvent, page, _event_json, newest_first=False)


@router.get("/criterion-runs", tags=["criterion-runs"])
def list_criterion_runs(
    session: SessionDep, caller: OrgCaller, page: PageDep, task_run_id: Annotated[str | None, Query()] = None
) -> Json:
    statement = queries.criterion_runs_listed(caller, task_run_id)
    return list_json(session, statement, CriterionRun, page, criterion_run_json)


@router.get("/criterion-runs/{criterion_run_id}", tags=["criterion-runs"])
def get_criterion_run(criterion_run_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    """The authoritative record, with full `details` and `evidence`, also for scored runs."""
    return criterion_run_json(queries.get_criterion_run(session, caller, criterion_run_id))


@router.post("/criterion-runs/{criterion_run_id}/override", tags=["criterion-runs"])
def override_criterion_run(
    criterion_run_id: str, body: OverrideCreate, session: SessionDep, caller: OrgCaller
) -> Json:
    """Record a person's verdict (who, when, why); the task and benchmark run are rescored with it."""
    return criterion_run_json(overrides.override_criterion_run(session, caller, criterion_run_id, body))


@router.get("/playgrounds/{playground_id}", tags=["playgrounds"])
def get_playground(playground_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    playground = queries.get_playground(session, caller, playground_id)
    return playground_json(playground, sandboxes_of(session, playground.id))


@router.get("/sandboxes/{sandbox_id}/events", tags=["playgrounds"], dependencies=[SandboxEventsFlushed])
def list_sandbox_events(sandbox_id: str, session: SessionDep, caller: OrgCaller, page: PageDep) -> Json:
    statement = queries.sandbox_events_listed(session, caller, sandbox_id)
    return list_json(session, statement, SandboxEvent, page, _event_json, newest_first=False)


def _event_json(row: SandboxEvent) -> Json:
    return {
        "id": row.id,
        "sandbox_id": row.sandbox_id,
        "seq": row.seq,
        "type": row.type,
        "method": row.method,
        "path": row.path,
        "status": row.status,
        "request": row.request,
        "response": row.response,
        "truncated": row.truncated,
        "created_at": iso(row.created_at),
    }
