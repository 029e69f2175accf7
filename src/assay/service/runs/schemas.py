"""Run request bodies and the response shapes of docs/api.md.

Scores are stored as exact fractions and leave as floats here, on output only (docs/scoring.md).
For a `scored: true` run the complete (and rescore) response leaves out each check's `details`
and `evidence`, so the rubric does not leak to the agent; `GET /criterion-runs/{id}` keeps them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from assay.core.statistics import TaskTrials, run_statistics
from assay.sandboxes import Access, surface_endpoints
from assay.store import iso
from assay.store.models import BenchmarkRun, CriterionRun, Playground, Sandbox, TaskRun

__all__ = [
    "BenchmarkRunCreate",
    "CheckOut",
    "CompletionOut",
    "V1BenchmarkRunOut",
    "V1CreatedOut",
    "V1StartedOut",
    "V1TaskRunOut",
    "agent_task_json",
    "benchmark_run_json",
    "completion_json",
    "criterion_run_json",
    "playground_json",
    "started_json",
    "task_run_json",
    "trials_by_task",
    "v1_benchmark_run_json",
    "v1_created_json",
    "v1_task_run_json",
]


class BenchmarkRunCreate(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", use_attribute_docstrings=True)

    benchmark_id: str | None = None
    """Run the current draft of this benchmark."""
    benchmark: str | None = None
    """Run a published version: `slug@version`, or `slug` for the latest."""
    scored: bool = False
    """Scored runs keep `details` and `evidence` out of the complete response."""
    trials: Annotated[int, Field(ge=1, le=50)] = 1
    """Run each task this many times, each in its own playground; the run then reports a 95%
    interval, pass@k and pass^k (docs/scoring.md)."""
    agent: Any = None
    solver_id: str | None = None
    """With an org key: attribute the run to this solver (a Solver key implies its own)."""


class CheckOut(BaseModel):
    criterion_id: str | None
    label: str
    axis: str | None
    weight: float
    status: str
    """`ok`, or `error` when the check could not judge (docs/assertions.md)."""
    passed: bool
    score: float
    details: str | None = None
    """Absent for `scored: true` runs."""
    evidence: dict[str, Any] | None = None
    """Absent for `scored: true` runs; always on `GET /criterion-runs/{id}`."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class CompletionOut(BaseModel):
    """The body of `complete` and `rescore` (docs/api.md)."""

    task_run_id: str
    phase: str
    status: str
    verdict: str | None
    score: float | None
    axes: dict[str, dict[str, float]]
    checks: list[CheckOut]


class _Out(BaseModel):
    """An answer the handler writes as JSON itself (the hot path skips FastAPI's re-encoding): the
    model only documents it in OpenAPI, where schemathesis checks every answer against it."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class BenchmarkRef(_Out):
    """Which benchmark a run is of: a published `slug@version`, or a draft (`slug`, `version` null)."""

    slug: str | None
    version: int | None
    name: str


class V1TaskRunLink(_Out):
    id: str
    task_id: str
    name: str
    phase: str
    start_url: str
    complete_url: str


class V1CreatedOut(_Out):
    """`POST /v1/benchmark-runs` (docs/api.md): the run, its token (shown once) and its task runs."""

    benchmark_run_id: str
    benchmark: BenchmarkRef
    scored: bool
    phase: str
    bearer_token: str
    bearer_token_expires_at: str | None
    endpoints: dict[str, str]
    """The run-level surfaces, routed to its single started task run."""
    task_runs: list[V1TaskRunLink]


class V1TaskRunSummary(_Out):
    id: str
    task_id: str
    name: str
    phase: str
    status: str
    verdict: str | None
    score: float | None


class V1BenchmarkRunOut(_Out):
    benchmark_run_id: str
    benchmark: BenchmarkRef
    scored: bool
    phase: str
    status: str
    score: float | None
    verdict: str | None
    task_runs: list[V1TaskRunSummary]


class AgentTaskOut(_Out):
    """The task as the agent sees it: never its criteria."""

    id: str
    name: str
    task_item: Any = None


class V1StartedOut(_Out):
    """`POST /v1/task-runs/{id}/start`: where the sandboxes are and how to reach them."""

    task_run_id: str
    phase: str
    playground_id: str | None
    deadline_at: str | None
    endpoints: dict[str, Any]
    credentials: dict[str, Any]
    task: AgentTaskOut


class V1TaskRunOut(_Out):
    task_run_id: str
    benchmark_run_id: str
    name: str
    phase: str
    status: str
    verdict: str | None
    score: float | None
    playground_id: str | None
    started_at: str | None
    deadline_at: str | None
    completed_at: str | None
    task: AgentTaskOut
    start_url: str
    complete_url: str


def _score(text: str | None) -> float | None:
    return None if text is None else float(Fraction(text))


def criterion_run_json(row: CriterionRun) -> dict[str, Any]:
    """The authoritative record: `details` and `evidence` always, also for scored runs."""
    return {
        "id": row.id,
        "task_run_id": row.task_run_id,
        "criterion_id": row.criterion_id,
        "label": row.label,
        "axis": row.axis,
        "weight": row.weight,
        "status": row.status,
        "passed": row.passed,
        "score": _score(row.score),
        "details": row.details,
        "evidence": row.evidence,
        "override": row.override,
        "superseded": row.superseded,
        "started_at": iso(row.started_at),
        "completed_at": iso(row.completed_at),
    }


def _summary(row: CriterionRun) -> dict[str, Any]:
    body = {
        "id": row.id,
        "criterion_id": row.criterion_id,
        "status": row.status,
        "passed": row.passed,
        "score": _score(row.score),
    }
    if row.override:
        body["override"] = row.override
    return body


def task_run_json(
    row: TaskRun, criterion_runs: list[CriterionRun] | None = None, *, snapshot: bool = True
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "benchmark_run_id": row.benchmark_run_id,
        "task_id": row.task_id,
        "name": row.name,
        "playground_id": row.playground_id,
        "phase": row.phase,
        "status": row.status,
        "verdict": row.verdict,
        "score": _score(row.score),
        "axes": row.axes,
        "trial": row.trial,
    }
    if row.gate:
        body["gated_by"] = row.gate
    if snapshot:
        body["snapshot"] = {"task": row.snapshot["task"], "criteria": row.snapshot["criteria"]}
        if row.snapshot.get("vocabulary"):
            body["snapshot"]["vocabulary"] = row.snapshot["vocabulary"]
    if row.failure_reason:
        body["failure_reason"] = row.failure_reason
    body.update(
        {
            "created_at": iso(row.created_at),
            "started_at": iso(row.started_at),
            "completed_at": iso(row.completed_at),
            "deadline_at": iso(row.deadline_at),
        }
    )
    if criterion_runs is not None:
        body["criterion_runs"] = [_summary(run) for run in criterion_runs]
    return body


def benchmark_run_json(row: BenchmarkRun, task_runs: list[TaskRun] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "benchmark_id": row.benchmark_id,
        "benchmark": row.benchmark_ref,
        "solver_id": row.solver_id,
        "agent": row.agent,
        "scored": row.scored,
        "phase": row.phase,
        "status": row.status,
        "score": _score(row.score),
        "verdict": row.verdict,
        "concurrency": row.concurrency,
        "trials": row.trials,
        "bearer_token_expires_at": iso(row.token_expires_at),
        "created_at": iso(row.created_at),
        "started_at": iso(row.started_at),
        "completed_at": iso(row.completed_at),
    }
    if task_runs is not None:
        body["task_runs"] = [task_run_json(task_run, snapshot=False) for task_run in task_runs]
        if row.phase == "completed":
            body["statistics"] = run_statistics(trials_by_task(task_runs), row.trials).as_json()
    return body


def trials_by_task(task_runs: list[TaskRun]) -> dict[str, TaskTrials]:
    """Each task's trials in position order; a run that never scored counts as 0 and not passed."""
    grouped: dict[str, list[TaskRun]] = {}
    for task_run in task_runs:
        grouped.setdefault(task_run.task_id, []).append(task_run)
    return {
        task_id: TaskTrials(
            tuple(_score(run.score) or 0.0 for run in runs), tuple(run.verdict == "pass" for run in runs)
        )
        for task_id, runs in grouped.items()
    }


def _urls(task_run_id: str) -> dict[str, str]:
    return {
        "start_url": f"/v1/task-runs/{task_run_id}/start",
        "complete_url": f"/v1/task-runs/{task_run_id}/complete",
    }


def run_endpoints(benchmark_run_id: str) -> dict[str, str]:
    """The run-level surfaces, routed to the single started task run (docs/api.md)."""
    return surface_endpoints(f"/v1/benchmark-runs/{benchmark_run_id}")


def v1_created_json(row: BenchmarkRun, token: str, task_runs: list[TaskRun]) -> dict[str, Any]:
    return {
        "benchmark_run_id": row.id,
        "benchmark": row.benchmark_ref,
        "scored": row.scored,
        "phase": row.phase,
        "bearer_token": token,
        "bearer_token_expires_at": iso(row.token_expires_at),
        "endpoints": run_endpoints(row.id),
        "task_runs": [
            {"id": tr.id, "task_id": tr.task_id, "name": tr.name, "phase": tr.phase, **_urls(tr.id)}
            for tr in task_runs
        ],
    }


def v1_benchmark_run_json(row: BenchmarkRun, task_runs: list[TaskRun]) -> dict[str, Any]:
    return {
        "benchmark_run_id": row.id,
        "benchmark": row.benchmark_ref,
        "scored": row.scored,
        "phase": row.phase,
        "status": row.status,
        "score": _score(row.score),
        "verdict": row.verdict,
        "task_runs": [
            {
                "id": tr.id,
                "task_id": tr.task_id,
                "name": tr.name,
                "phase": tr.phase,
                "status": tr.status,
                "verdict": tr.verdict,
                "score": _score(tr.score),
            }
            for tr in task_runs
        ],
    }


def agent_task_json(row: TaskRun) -> dict[str, Any]:
    """The task as the agent needs it (docs/api.md): `{id, name, task_item}` from the frozen task —
    never its criteria, weights or evidence, which stay behind an org key."""
    task = row.snapshot["task"]
    return {
        "id": task.get("id", row.task_id),
        "name": task.get("name", row.name),
        "task_item": task.get("task_item"),
    }


def started_json(row: TaskRun, access: Access) -> dict[str, Any]:
    return {
        "task_run_id": row.id,
        "phase": row.phase,
        "playground_id": row.playground_id,
        "deadline_at": iso(row.deadline_at),
        "endpoints": access.endpoints,
        "credentials": access.credentials,
        "task": agent_task_json(row),
    }


def v1_task_run_json(row: TaskRun) -> dict[str, Any]:
    """`GET /v1/task-runs/{id}`: the task run's progress and its task, for the agent."""
    return {
        "task_run_id": row.id,
        "benchmark_run_id": row.benchmark_run_id,
        "name": row.name,
        "phase": row.phase,
        "status": row.status,
        "verdict": row.verdict,
        "score": _score(row.score),
        "playground_id": row.playground_id,
        "started_at": iso(row.started_at),
        "deadline_at": iso(row.deadline_at),
        "completed_at": iso(row.completed_at),
        "task": agent_task_json(row),
        **_urls(row.id),
    }


def completion_json(row: TaskRun, criterion_runs: list[CriterionRun], *, scored: bool) -> dict[str, Any]:
    checks = []
    for run in criterion_runs:
        check: dict[str, Any] = {
            "criterion_id": run.criterion_id,
            "label": run.label,
            "axis": run.axis,
            "weight": run.weight,
            "status": run.status,
            "passed": run.passed,
            "score": _score(run.score),
        }
        if not scored:
            check["details"] = run.details
            check["evidence"] = run.evidence
        if run.override:
            check["override"] = run.override
        checks.append(check)
    body = {
        "task_run_id": row.id,
        "phase": row.phase,
        "status": row.status,
        "verdict": row.verdict,
        "score": _score(row.score),
        "axes": row.axes or {},
        "checks": checks,
    }
    if row.gate:
        body["gated_by"] = row.gate
    return body


def playground_json(row: Playground, sandboxes: list[Sandbox]) -> dict[str, Any]:
    return {
        "id": row.id,
        "task_run_id": row.task_run_id,
        "status": row.status,
        "sandboxes": [
            {"id": sandbox.id, "type": sandbox.type, "status": sandbox.status} for sandbox in sandboxes
        ],
        "created_at": iso(row.created_at),
    }
