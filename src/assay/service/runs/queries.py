"""What the run endpoints and the results viewer read: caller-scoped runs, settled before they are
shown, their events and their captured state.

Handlers read through these functions, never through `repository` or SQL of their own, so the
scoping rules (another org's id is a 404) and the lazy settle of an overdue run hold on every path
that shows a run. Lists return a scoped statement for `pages.list_json` to page through.
"""

from __future__ import annotations

import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

from sqlalchemy import Row, Select, Text, cast, func, select
from sqlalchemy.orm import Session

from assay import sandboxes
from assay.core.errors import SnapshotError
from assay.service.runs import repository as repo
from assay.service.runs.lifecycle import settle_if_due
from assay.service.runs.purge import SELF_TEST_AGENT
from assay.snapshot import archive_snapshot
from assay.store import Caller, Conflict, get_owned, utcnow, where_given
from assay.store.models import BenchmarkRun, CriterionRun, Playground, Sandbox, SandboxEvent, TaskRun

__all__ = [
    "benchmark_run_summaries",
    "benchmark_runs_listed",
    "comparable_runs",
    "criterion_means",
    "criterion_runs_listed",
    "current_criterion_runs",
    "event_of",
    "get_benchmark_run",
    "get_criterion_run",
    "get_playground",
    "get_task_run",
    "overrides_in_force",
    "playground_event_previews",
    "playground_events_listed",
    "sandbox_events_listed",
    "settled_benchmark_run",
    "settled_task_run",
    "state_archive",
    "task_runs_listed",
]

get_benchmark_run = repo.get_benchmark_run
get_task_run = repo.get_task_run
get_criterion_run = repo.get_criterion_run
current_criterion_runs = repo.current_criterion_runs
overrides_in_force = repo.overrides_in_force


def get_playground(session: Session, caller: Caller, playground_id: str) -> Playground:
    playground: Playground = repo.get_playground(session, caller, playground_id)
    return playground


# -- benchmark runs ------------------------------------------------------------------------------


def settled_benchmark_run(session: Session, caller: Caller, ident: str) -> tuple[BenchmarkRun, list[TaskRun]]:
    """The run and its task runs, an overdue run settled first (its deadlines are past)."""
    run = repo.get_benchmark_run(session, caller, ident)
    return run, settle_if_due(session, run, utcnow())


def benchmark_runs_listed(caller: Caller, benchmark_id: str | None, *, self_tests: bool) -> Select[Any]:
    """Self-test runs (an author's checks, not an agent's results) only when asked for."""
    statement = where_given(repo.benchmark_runs(caller), BenchmarkRun.benchmark_id, benchmark_id)
    if not self_tests:
        agent_name = func.coalesce(BenchmarkRun.agent["name"].as_string(), "")
        statement = statement.where(agent_name != SELF_TEST_AGENT)
    return statement


def benchmark_run_summaries(session: Session, caller: Caller, phase: str, verdict: str) -> list[Row[Any]]:
    """The org's runs as the viewer's list columns, narrowed by phase and verdict when given."""
    columns = (
        BenchmarkRun.id,
        BenchmarkRun.benchmark_id,
        BenchmarkRun.benchmark_ref,
        BenchmarkRun.agent,
        BenchmarkRun.phase,
        BenchmarkRun.verdict,
        BenchmarkRun.score,
        BenchmarkRun.created_at,
        BenchmarkRun.started_at,
        BenchmarkRun.completed_at,
    )
    statement = select(*columns).where(BenchmarkRun.org_id == caller.org_id)
    for column, value in ((BenchmarkRun.phase, phase), (BenchmarkRun.verdict, verdict)):
        if value:
            statement = statement.where(column == value)
    return list(session.execute(statement))


def _is_self_test(agent: Any) -> bool:
    return isinstance(agent, dict) and agent.get("name") == SELF_TEST_AGENT


def comparable_runs(session: Session, caller: Caller, run: BenchmarkRun) -> list[Row[Any]]:
    """Up to 50 other completed runs of the same benchmark, newest first: agents' runs for an
    agent's run, self-test runs for a self-test run."""
    others = session.execute(
        select(BenchmarkRun.id, BenchmarkRun.created_at, BenchmarkRun.agent)
        .where(
            BenchmarkRun.org_id == caller.org_id,
            BenchmarkRun.benchmark_id == run.benchmark_id,
            BenchmarkRun.id != run.id,
            BenchmarkRun.phase == "completed",
        )
        .order_by(BenchmarkRun.created_at.desc())
        .limit(200)
    ).all()
    testing = _is_self_test(run.agent)
    return [other for other in others if _is_self_test(other.agent) == testing][:50]


# -- task runs and criterion runs --------------------------------------------------------------


def settled_task_run(session: Session, caller: Caller, ident: str) -> TaskRun:
    """The task run, its benchmark run settled first when overdue (so its status is current)."""
    task_run = repo.get_task_run(session, caller, ident)
    settle_if_due(session, repo.get_benchmark_run(session, caller, task_run.benchmark_run_id), utcnow())
    return task_run


def task_runs_listed(caller: Caller, benchmark_run_id: str | None) -> Select[Any]:
    return where_given(repo.task_runs(caller), TaskRun.benchmark_run_id, benchmark_run_id)


def criterion_runs_listed(caller: Caller, task_run_id: str | None) -> Select[Any]:
    return where_given(repo.criterion_runs(caller), CriterionRun.task_run_id, task_run_id)


def criterion_means(session: Session, task_runs: list[TaskRun]) -> dict[tuple[str, int], tuple[str, float]]:
    """(task id, criterion position) → (label, mean score over the task's trials)."""
    scores: dict[tuple[str, int], list[float]] = {}
    labels: dict[tuple[str, int], str] = {}
    for task_run in task_runs:
        for run in repo.current_criterion_runs(session, task_run.id):
            key = (task_run.task_id, run.position)
            scores.setdefault(key, []).append(float(Fraction(run.score)))
            labels[key] = run.label
    return {key: (labels[key], sum(values) / len(values)) for key, values in scores.items()}


def state_archive(session: Session, task_run: TaskRun) -> bytes:
    """The task run's captured state as a snapshot tar.gz (409 when it has none or cannot be written)."""
    if task_run.capture is None:
        raise Conflict(f"task run {task_run.id} is {task_run.status} and has no captured state")
    with tempfile.TemporaryDirectory(prefix="assay-state-") as folder:
        try:
            data = archive_snapshot(
                sandboxes.materialize(task_run.capture, Path(folder) / "snapshot", session)
            )
        except SnapshotError as unwritable:  # e.g. a resource id `..` stored before writes refused it
            raise Conflict(
                f"the captured state of task run {task_run.id} cannot be written as a snapshot: {unwritable}"
            ) from None
    return data


# -- events --------------------------------------------------------------------------------------


def playground_events_listed(caller: Caller, task_run: TaskRun) -> Select[Any]:
    """The events of every sandbox of the task run's playground."""
    boxes = select(Sandbox.id).where(Sandbox.playground_id == task_run.playground_id)
    return select(SandboxEvent).where(
        SandboxEvent.org_id == caller.org_id, SandboxEvent.sandbox_id.in_(boxes)
    )


def sandbox_events_listed(session: Session, caller: Caller, sandbox_id: str) -> Select[Any]:
    """The events of one of the caller's sandboxes (404 for another org's)."""
    sandbox = get_owned(session, Sandbox, caller, sandbox_id, "sandbox")
    return select(SandboxEvent).where(SandboxEvent.sandbox_id == sandbox.id)


def event_of(session: Session, caller: Caller, event_id: str) -> SandboxEvent | None:
    found: SandboxEvent | None = session.scalars(
        select(SandboxEvent).where(SandboxEvent.id == event_id, SandboxEvent.org_id == caller.org_id)
    ).first()
    return found


def playground_event_previews(
    session: Session, playground_id: str | None, preview_chars: int
) -> tuple[list[Any], dict[str, str]]:
    """The playground's events, oldest first, with bodies as JSON text cut to `preview_chars` in
    SQL (never decoded whole: a page of 2,000 events must not parse and re-encode megabytes), and
    each sandbox's surface type by id."""
    if playground_id is None:
        return [], {}
    surfaces = dict(
        session.execute(select(Sandbox.id, Sandbox.type).where(Sandbox.playground_id == playground_id)).all()
    )
    if not surfaces:
        return [], {}

    def preview(column: Any) -> Any:
        return func.substr(cast(column, Text), 1, preview_chars)

    statement = (
        select(
            SandboxEvent.id,
            SandboxEvent.sandbox_id,
            SandboxEvent.seq,
            SandboxEvent.type,
            SandboxEvent.method,
            SandboxEvent.path,
            SandboxEvent.status,
            SandboxEvent.created_at,
            preview(SandboxEvent.request),
            preview(SandboxEvent.response),
        )
        .where(SandboxEvent.sandbox_id.in_(list(surfaces)))
        .order_by(SandboxEvent.created_at, SandboxEvent.seq)
    )
    return list(session.execute(statement)), surfaces
