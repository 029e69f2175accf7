"""Ending task runs and finalizing benchmark runs (SPEC §1.1, §4), shared by the actions, the lazy
checks on read and the sweeper.

A task run past its deadline is `timed_out` (score 0, verdict fail); when a run token expires,
task runs that never started are `cancelled`. Once every task run has ended, the benchmark run's
score is the exact mean of their scores (`core.scoring.score_benchmark_run`).
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.core.scoring import TaskScore, score_benchmark_run
from assay.sandboxes import teardown
from assay.service.runs import states
from assay.service.runs.repository import task_runs_of
from assay.store.models import BenchmarkRun, TaskRun

__all__ = [
    "end_task_run",
    "finalize_if_done",
    "is_due",
    "lock_run",
    "settle",
    "settle_if_due",
    "store_score",
]


def end_task_run(
    session: Session,
    task_run: TaskRun,
    event: str,
    now: datetime,
    *,
    score: Fraction = Fraction(0),
    verdict: str = "fail",
    axes: dict[str, Any] | None = None,
    gate: dict[str, Any] | None = None,
    reason: str | None = None,
) -> None:
    state = states.next_state(
        states.TASK_RUN, (task_run.phase, task_run.status), event, f"task run {task_run.id}"
    )
    task_run.phase, task_run.status = state
    task_run.score = str(score)
    task_run.verdict = verdict
    task_run.axes = axes or {}
    task_run.gate = gate
    task_run.completed_at = now
    if reason:
        task_run.failure_reason = reason
    teardown(session, task_run.playground_id)


def store_score(task_run: TaskRun, score: TaskScore) -> None:
    """A scored task run's result: score, verdict, axes and the gate that zeroed it, if any."""
    task_run.score = str(score.score)
    task_run.verdict = score.verdict
    task_run.axes = score.axes_json()
    task_run.gate = score.gated_by.as_json() if score.gated_by else None


def finalize_if_done(benchmark_run: BenchmarkRun, task_runs: list[TaskRun], now: datetime) -> bool:
    """Score the benchmark run once its last task run has ended; True when it is final."""
    if not all(states.is_ended(task_run.status) for task_run in task_runs):
        return False
    score, verdict = score_benchmark_run([Fraction(task_run.score or 0) for task_run in task_runs])
    benchmark_run.score, benchmark_run.verdict = str(score), verdict
    if benchmark_run.phase != "completed":
        current = (benchmark_run.phase, benchmark_run.status)
        state = states.next_state(
            states.BENCHMARK_RUN, current, "finalize", f"benchmark run {benchmark_run.id}"
        )
        benchmark_run.phase, benchmark_run.status = state
        benchmark_run.completed_at = now
    return True


def is_due(benchmark_run: BenchmarkRun, task_runs: list[TaskRun], now: datetime) -> bool:
    """Whether a deadline or the token's expiry has passed without being applied yet."""
    return any(_due_event(benchmark_run, task_run, now) for task_run in task_runs)


def settle(session: Session, benchmark_run: BenchmarkRun, task_runs: list[TaskRun], now: datetime) -> None:
    """Apply passed deadlines and token expiry (rows already locked by the caller)."""
    for task_run in task_runs:
        event = _due_event(benchmark_run, task_run, now)
        if event:
            end_task_run(session, task_run, event, now)
    finalize_if_done(benchmark_run, task_runs, now)


def _due_event(benchmark_run: BenchmarkRun, task_run: TaskRun, now: datetime) -> states.TaskEvent | None:
    current = (task_run.phase, task_run.status)
    return states.due_event(current, task_run.deadline_at, benchmark_run.token_expires_at, now)


def lock_run(session: Session, benchmark_run_id: str) -> tuple[BenchmarkRun, list[TaskRun]]:
    """Lock the benchmark run, then its task runs (the one lock order), re-reading both."""
    statement = (
        select(BenchmarkRun)
        .where(BenchmarkRun.id == benchmark_run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    benchmark_run = session.scalars(statement).one()
    return benchmark_run, task_runs_of(session, benchmark_run_id, lock=True)


def settle_if_due(session: Session, benchmark_run: BenchmarkRun, now: datetime) -> list[TaskRun]:
    """The lazy half of SPEC §1.1's timeouts: on read, apply what is due under the run's lock."""
    task_runs = task_runs_of(session, benchmark_run.id)
    if not is_due(benchmark_run, task_runs, now):
        return task_runs
    benchmark_run, task_runs = lock_run(session, benchmark_run.id)
    settle(session, benchmark_run, task_runs, now)
    return task_runs
