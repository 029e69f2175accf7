"""Caller-scoped run queries (docs/api.md): org keys see their org's runs, Solver keys the runs their
solver created, run tokens only their own run. Anything else is not found, never forbidden.

`task_runs_of(..., lock=True)` and `lock_task_run` take row locks (`SELECT … FOR UPDATE` on
PostgreSQL; SQLite transactions are already exclusive, see `store.database`) and refresh the rows,
so a waiter sees the winner's commit. Lock order is always task runs (by position), then the
benchmark run (`service.runs.lifecycle`).
"""

from __future__ import annotations

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from assay.store import Caller, NotFound, first_or_404, get_owned, owned
from assay.store.models import BenchmarkRun, CriterionRun, Playground, TaskRun

__all__ = [
    "benchmark_runs",
    "criterion_runs",
    "current_criterion_runs",
    "get_benchmark_run",
    "get_criterion_run",
    "get_playground",
    "get_task_run",
    "lock_task_run",
    "overrides_in_force",
    "task_run_and_run",
    "task_runs",
    "task_runs_of",
]


def benchmark_runs(caller: Caller) -> Select[BenchmarkRun]:
    statement = select(BenchmarkRun).where(BenchmarkRun.org_id == caller.org_id)
    if caller.kind == "solver":
        statement = statement.where(BenchmarkRun.solver_id == caller.solver_id)
    elif caller.kind == "run":
        statement = statement.where(BenchmarkRun.id == caller.benchmark_run_id)
    return statement


def task_runs(caller: Caller) -> Select[TaskRun]:
    statement = select(TaskRun).where(TaskRun.org_id == caller.org_id)
    if caller.kind == "run":
        statement = statement.where(TaskRun.benchmark_run_id == caller.benchmark_run_id)
    elif caller.kind == "solver":
        mine = select(BenchmarkRun.id).where(BenchmarkRun.solver_id == caller.solver_id)
        statement = statement.where(TaskRun.benchmark_run_id.in_(mine))
    return statement


def criterion_runs(caller: Caller) -> Select[CriterionRun]:
    return owned(CriterionRun, caller)


def get_benchmark_run(session: Session, caller: Caller, ident: str) -> BenchmarkRun:
    statement = benchmark_runs(caller).where(BenchmarkRun.id == ident)
    return first_or_404(session, statement, "benchmark run", ident)


def get_task_run(session: Session, caller: Caller, ident: str) -> TaskRun:
    statement = task_runs(caller).where(TaskRun.id == ident)
    return first_or_404(session, statement, "task run", ident)


def lock_task_run(session: Session, caller: Caller, ident: str) -> TaskRun:
    """The task run as `caller` sees it (foreign → 404), its row locked and re-read."""
    statement = (
        task_runs(caller)
        .where(TaskRun.id == ident)
        .with_for_update(of=TaskRun)
        .execution_options(populate_existing=True)
    )
    return first_or_404(session, statement, "task run", ident)


def task_run_and_run(
    session: Session, caller: Caller, ident: str, *, lock: bool = False
) -> tuple[TaskRun, BenchmarkRun]:
    """The task run as `caller` sees it (foreign → 404) with its benchmark run, in one statement;
    with `lock`, the task run's row is locked (not the run's: its counters change only by
    conditional UPDATEs) and both are re-read."""
    statement = (
        task_runs(caller)
        .add_columns(BenchmarkRun)
        .join(BenchmarkRun, BenchmarkRun.id == TaskRun.benchmark_run_id)
        .where(TaskRun.id == ident)
    )
    if lock:
        statement = statement.with_for_update(of=TaskRun).execution_options(populate_existing=True)
    found = session.execute(statement).first()
    if found is None:
        raise NotFound.of("task run", ident)
    return found[0], found[1]


def get_criterion_run(session: Session, caller: Caller, ident: str) -> CriterionRun:
    statement = criterion_runs(caller).where(CriterionRun.id == ident)
    return first_or_404(session, statement, "criterion run", ident)


def get_playground(session: Session, caller: Caller, ident: str) -> Playground:
    return get_owned(session, Playground, caller, ident, "playground")


def task_runs_of(
    session: Session, benchmark_run_id: str, *, lock: bool = False, fresh: bool = False
) -> list[TaskRun]:
    """The run's task runs in order; `fresh` (implied by `lock`) overwrites rows already loaded."""
    statement = select(TaskRun).where(TaskRun.benchmark_run_id == benchmark_run_id).order_by(TaskRun.position)
    if lock:
        statement = statement.with_for_update()
    if lock or fresh:
        statement = statement.execution_options(populate_existing=True)
    return list(session.scalars(statement))


def current_criterion_runs(session: Session, task_run_id: str) -> list[CriterionRun]:
    """The latest set (not superseded), in criterion order."""
    statement = (
        select(CriterionRun)
        .where(CriterionRun.task_run_id == task_run_id, CriterionRun.superseded.is_(False))
        .order_by(CriterionRun.position)
    )
    return list(session.scalars(statement))


def overrides_in_force(session: Session, task_run_ids: list[str]) -> dict[str, int]:
    """Per task run, how many current criterion runs carry a person's verdict (stale ones excluded)."""
    statement = select(CriterionRun.task_run_id, CriterionRun.override).where(
        CriterionRun.task_run_id.in_(task_run_ids),
        CriterionRun.superseded.is_(False),
        CriterionRun.override.is_not(None),
    )
    counts: dict[str, int] = {}
    for task_run_id, override in session.execute(statement):
        if isinstance(override, dict) and not override.get("stale"):
            counts[task_run_id] = counts.get(task_run_id, 0) + 1
    return counts
