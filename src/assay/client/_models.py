"""Typed views of the API's JSON (docs/api.md): what the SDK's methods return.

Every model keeps keys it does not know (`extra="allow"`), so a newer server never breaks an older
client, and `model_dump()` gives back the JSON as it came. Timestamps stay RFC 3339 strings, as on
the wire; scores are floats.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ApiKey",
    "Benchmark",
    "BenchmarkRun",
    "BenchmarkRunCreated",
    "BenchmarkRunSummary",
    "BenchmarkVersion",
    "Check",
    "Completion",
    "Criterion",
    "CriterionRun",
    "CriterionRunSummary",
    "Dataset",
    "DatasetEntity",
    "Environment",
    "Model",
    "Playground",
    "RunTaskRun",
    "SandboxEvent",
    "Solver",
    "StartedTaskRun",
    "Task",
    "TaskRun",
    "TaskView",
]


class Model(BaseModel):
    """Base of every SDK model: unknown keys are kept, nothing is coerced away."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class DatasetEntity(Model):
    id: str
    dataset_id: str | None = None
    kind: str
    key: str | None = None
    data: dict[str, Any] = {}
    created_at: str | None = None


class Dataset(Model):
    id: str
    name: str
    type: str
    data: dict[str, Any] = {}
    entities: list[DatasetEntity] | None = None
    created_at: str | None = None
    updated_at: str | None = None


class Environment(Model):
    id: str
    name: str
    description: str | None = None
    dataset_ids: list[str] = []
    settings: dict[str, Any] = {}
    created_at: str | None = None
    updated_at: str | None = None


class Benchmark(Model):
    id: str
    name: str
    description: str | None = None
    environment_id: str | None = None
    timeout: int | None = None
    concurrency: int | None = None
    slug: str | None = None
    vocabulary: list[Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None


class BenchmarkVersion(Model):
    benchmark_id: str
    slug: str
    version: int
    name: str | None = None
    created_at: str | None = None


class Criterion(Model):
    """Seed 003's Criterion object."""

    id: str
    task_id: str
    input_entity_id: str | None = None
    label: str
    assertion: dict[str, Any]
    weight: float = 1
    axis: str | None = None
    required: bool = False
    idle_ok: bool = False
    created_at: str | None = None
    updated_at: str | None = None


class Task(Model):
    id: str
    benchmark_id: str
    name: str
    task_item: Any = None
    scenario: list[dict[str, Any]] | None = None
    tags: list[str] = []
    timeout: int | None = None
    dataset_ids: list[str] = []
    input_entity: dict[str, Any] | None = None
    reference: dict[str, Any] | None = None
    """A reference solution: `{actions: [...]}` the self-test replays, or `{snapshot: {files}}` it judges."""
    criteria: list[Criterion] | None = None
    """Present on `get` (creation order), absent in lists."""
    created_at: str | None = None
    updated_at: str | None = None


class Solver(Model):
    id: str
    name: str
    description: str | None = None
    version: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class ApiKey(Model):
    id: str
    key: str | None = None
    """The plaintext token: only in the response that created the key."""
    prefix: str | None = None
    suffix: str | None = None
    name: str | None = None
    solver_id: str | None = None
    created_at: str | None = None


class CriterionRunSummary(Model):
    id: str
    criterion_id: str | None = None
    status: str
    passed: bool
    score: float | None = None


class TaskRun(Model):
    id: str
    benchmark_run_id: str
    task_id: str | None = None
    name: str
    playground_id: str | None = None
    phase: str
    status: str
    verdict: str | None = None
    score: float | None = None
    axes: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    """`{task, criteria}` frozen at run creation; on `get`, not in lists."""
    failure_reason: str | None = None
    gated_by: dict[str, Any] | None = None
    """`{position, label, ungated_score}` when a required criterion zeroed the score (docs/scoring.md)."""
    criterion_runs: list[CriterionRunSummary] | None = None
    created_at: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    deadline_at: str | None = None


class BenchmarkRun(Model):
    id: str
    benchmark_id: str | None = None
    benchmark: dict[str, Any] | None = None
    solver_id: str | None = None
    agent: Any = None
    scored: bool = False
    phase: str
    status: str
    score: float | None = None
    verdict: str | None = None
    task_runs: list[TaskRun] | None = None
    bearer_token: str | None = None
    """Only in the response of `create` on the internal API."""
    created_at: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


class CriterionRun(Model):
    """The authoritative record of one criterion on one task run, with full `evidence`."""

    id: str
    task_run_id: str
    criterion_id: str | None = None
    label: str
    axis: str | None = None
    weight: float = 1
    status: str
    passed: bool
    score: float | None = None
    details: str | None = None
    evidence: dict[str, Any] | None = None
    superseded: bool = False
    started_at: str | None = None
    completed_at: str | None = None


class RunTaskRun(Model):
    """A task run as `/v1` lists it: enough to start it and follow it."""

    id: str
    task_id: str | None = None
    name: str
    phase: str
    status: str | None = None
    verdict: str | None = None
    score: float | None = None
    start_url: str | None = None
    complete_url: str | None = None


class BenchmarkRunCreated(Model):
    """`POST /v1/benchmark-runs`: the run token is here, once."""

    benchmark_run_id: str
    benchmark: dict[str, Any]
    scored: bool
    phase: str
    bearer_token: str
    bearer_token_expires_at: str | None = None
    endpoints: dict[str, str] = {}
    task_runs: list[RunTaskRun] = []


class BenchmarkRunSummary(Model):
    """`GET /v1/benchmark-runs/{id}`."""

    benchmark_run_id: str
    benchmark: dict[str, Any]
    scored: bool
    phase: str
    status: str
    score: float | None = None
    verdict: str | None = None
    task_runs: list[RunTaskRun] = []


class TaskView(Model):
    """The task as the agent may see it: never criteria, weights or evidence."""

    id: str
    name: str
    task_item: Any = None


class StartedTaskRun(Model):
    """`POST /v1/task-runs/{id}/start`: where the surfaces are and how to log in to them."""

    task_run_id: str
    phase: str
    playground_id: str | None = None
    deadline_at: str | None = None
    endpoints: dict[str, str] = {}
    credentials: dict[str, Any] = {}
    task: TaskView | None = None


class Check(Model):
    criterion_id: str | None = None
    label: str
    axis: str | None = None
    weight: float = 1
    status: str
    passed: bool
    score: float | None = None
    details: str | None = None
    """Absent for `scored` runs."""
    evidence: dict[str, Any] | None = None
    """Absent for `scored` runs."""


class Completion(Model):
    """The body of `complete` and `rescore`."""

    task_run_id: str
    phase: str
    status: str
    verdict: str | None = None
    score: float | None = None
    axes: dict[str, Any] = {}
    checks: list[Check] = []


class Playground(Model):
    id: str
    task_run_id: str | None = None
    status: str
    sandboxes: list[dict[str, Any]] = []
    created_at: str | None = None


class SandboxEvent(Model):
    id: str
    sandbox_id: str
    seq: int
    type: str
    method: str | None = None
    path: str | None = None
    status: Any = None
    request: Any = None
    response: Any = None
    truncated: bool = False
    created_at: str | None = None
