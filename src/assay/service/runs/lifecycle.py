"""Ending task runs and finalizing benchmark runs (docs/api.md, docs/scoring.md), shared by the actions, the
lazy checks on read and the sweeper.

A task run past its deadline is `timed_out` (score 0, verdict fail); when a run token expires,
task runs that never started are `cancelled`. Once every task run has ended, the benchmark run's
score is the exact mean of their scores (`core.scoring.score_benchmark_run`).

The benchmark run's row keeps counters (`task_runs_total`, `task_runs_ended`, `task_runs_running`)
so that `start` and `complete` lock only their own task run: a slot is taken and an end is counted
with one conditional UPDATE of the run's row, the last statement of the transaction, so the run's
row lock is held for a commit's time (`docs/decisions/service.md`, "Benchmark run aggregates"). The change
that brings the ended count to the total finalizes the run, with one read of its task runs' scores
under that lock: once, and seeing every other end, which committed before it could take the lock.

Lock order, everywhere: task runs (in position order when several), then the benchmark run.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import Any, cast

from sqlalchemy import Row, Table, Update, and_, exists, func, inspect, literal, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from assay.core.scoring import TaskScore, score_benchmark_run
from assay.sandboxes import teardown
from assay.service.runs import states
from assay.service.runs.repository import task_runs_of
from assay.store.epoch import widen
from assay.store.models import BenchmarkRun, TaskRun, UtcDateTime

__all__ = [
    "count_ended",
    "end_task_run",
    "finalize_if_done",
    "is_due",
    "lock_run",
    "rescore_run",
    "running_ids",
    "settle_due",
    "settle_if_due",
    "settle_task_run",
    "store_score",
    "take_slot",
]

_QUIET = {"synchronize_session": False}


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
    """End the task run (the caller holds its row lock and counts the end with `count_ended`)."""
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
    """Score the benchmark run from `task_runs` (all of them, locked or just created) once every
    one has ended; True when it is final."""
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


def take_slot(
    session: Session, benchmark_run_id: str, now: datetime, *, task_run: TaskRun | None = None
) -> bool:
    """Count a started task run against the run's concurrency, if a slot is free: False when the
    limit is reached (or the run has ended). Call it last: it holds the run's row lock till commit.
    `task_run` (locked by the caller): its pending changes are written only if the slot is taken,
    in the same statement on PostgreSQL (`_with_task_run`)."""
    run = _RUNS
    statement = (
        update(run)
        .where(
            run.c.id == benchmark_run_id,
            run.c.status == "active",
            run.c.task_runs_running < run.c.concurrency,
        )
        .values(
            task_runs_running=run.c.task_runs_running + 1,
            phase=states.STARTED[0],
            started_at=_coalesce(run.c.started_at, now),
        )
        .returning(run.c.id)
    )
    taken = _with_task_run(session, statement, task_run) is not None
    _expire_run(session, benchmark_run_id)
    return taken


def _coalesce(column: Any, now: datetime) -> Any:
    return func.coalesce(column, literal(now, UtcDateTime()))


def count_ended(
    session: Session,
    benchmark_run_id: str,
    now: datetime,
    *,
    ended: int,
    released: int,
    task_run: TaskRun | None = None,
) -> None:
    """Count `ended` task runs as ended, `released` of which held a slot, in one UPDATE of the
    run's row; the change that reaches the total finalizes the run. Call it last (the run's row
    lock is held till commit). `task_run`'s pending changes (the one that ended, locked by the
    caller) go in the same statement on PostgreSQL (`_with_task_run`)."""
    run = _RUNS
    statement = (
        update(run)
        .where(run.c.id == benchmark_run_id)
        .values(
            task_runs_ended=run.c.task_runs_ended + ended,
            task_runs_running=run.c.task_runs_running - released,
        )
        .returning(run.c.task_runs_ended, run.c.task_runs_total, run.c.phase, run.c.status)
    )
    found = _with_task_run(session, statement, task_run)
    if found is None:
        raise LookupError(f"benchmark run {benchmark_run_id} is gone")
    ended_now, total, phase, status = tuple(found)
    if ended_now >= total:
        _finalize(session, benchmark_run_id, now, (phase, status))
    _expire_run(session, benchmark_run_id)


_RUNS = cast(Table, BenchmarkRun.__table__)
_TASK_RUNS = cast(Table, TaskRun.__table__)


def _with_task_run(session: Session, run_update: Update, task_run: TaskRun | None) -> Row[Any] | None:
    """Run `run_update` (an UPDATE of the run's row with RETURNING) after everything pending, and
    the first row it returns (None: it matched no row).

    With `task_run`, that row's pending changes are written only when the run's row matched.
    On PostgreSQL both go in one statement, the run's UPDATE a data-modifying CTE that the task
    run's UPDATE waits on (`WITH run_row AS (UPDATE benchmark_runs … RETURNING …) UPDATE task_runs
    … WHERE EXISTS (SELECT FROM run_row) RETURNING <run_row's columns>`): one round trip instead
    of two, at the end of `start` and `complete`, while the run's row lock is held. The lock order
    is kept: the caller holds the task run's lock already."""
    changes = _pending_columns(task_run) if task_run is not None else {}
    if task_run is None or not changes or session.get_bind().dialect.name != "postgresql":
        session.flush()  # unmatched, the task run's row was written all the same: the caller rolls back
        return session.execute(run_update).first()
    for key, value in changes.items():  # written here, so the flush leaves the row alone
        set_committed_value(task_run, key, value)
    session.flush()
    run_row = run_update.cte("run_row")
    task_runs = _TASK_RUNS
    statement = (
        update(task_runs)
        .where(task_runs.c.id == task_run.id, exists(select(literal(1)).select_from(run_row)))
        .values(**{_column_of(key): value for key, value in changes.items()})
        .returning(*(select(column).select_from(run_row).scalar_subquery() for column in run_row.c))
    )
    return session.execute(statement).first()


def _pending_columns(task_run: TaskRun) -> dict[str, Any]:
    """The task run's column attributes changed since it was loaded (or last flushed), new values."""
    state = inspect(task_run)
    changes: dict[str, Any] = {}
    for attribute in state.mapper.column_attrs:
        history = state.attrs[attribute.key].history
        if history.added:
            changes[attribute.key] = history.added[0]
    return changes


def _column_of(key: str) -> str:
    return str(TaskRun.__mapper__.column_attrs[key].columns[0].name)


def rescore_run(session: Session, benchmark_run_id: str, now: datetime) -> None:
    """After a task run's score changed: lock the run's row, then score it anew if it is final (a
    later rescore of another task run waits for this lock and so reads this one's score)."""
    session.flush()
    run = BenchmarkRun
    statement = (
        select(run.task_runs_ended, run.task_runs_total, run.phase, run.status)
        .where(run.id == benchmark_run_id)
        .with_for_update()
    )
    ended, total, phase, status = session.execute(statement).one()
    if ended >= total:
        _finalize(session, benchmark_run_id, now, (phase, status))
    _expire_run(session, benchmark_run_id)


def _finalize(session: Session, benchmark_run_id: str, now: datetime, current: tuple[str, str]) -> None:
    """Score the run from its task runs' scores (one read of two columns), under its row lock;
    `current` is its (phase, status), read with the lock.

    It completes no earlier than its last task run: each end is stamped when its transaction
    began, and the one that counts last may have begun before another that committed first."""
    ended = session.execute(
        select(TaskRun.score, TaskRun.completed_at).where(TaskRun.benchmark_run_id == benchmark_run_id)
    ).all()
    score, verdict = score_benchmark_run([Fraction(row.score or 0) for row in ended])
    now = max([now, *(row.completed_at for row in ended if row.completed_at is not None)])
    run = BenchmarkRun
    phase, status = current
    values: dict[str, Any] = {"score": str(score), "verdict": verdict}
    if phase != "completed":
        what = f"benchmark run {benchmark_run_id}"
        values["phase"], values["status"] = states.next_state(
            states.BENCHMARK_RUN, (phase, status), "finalize", what
        )
        values["completed_at"] = now
    session.execute(
        update(run).where(run.id == benchmark_run_id).values(**values).execution_options(**_QUIET)
    )


def _expire_run(session: Session, benchmark_run_id: str) -> None:
    """A loaded row of the run is reloaded on its next use: its counters were changed in SQL."""
    for row in list(session.identity_map.values()):
        if isinstance(row, BenchmarkRun) and row.id == benchmark_run_id:
            session.expire(row)


def running_ids(session: Session, benchmark_run_id: str) -> list[str]:
    """The run's task runs that hold a slot (for the 409 that names them)."""
    statement = (
        select(TaskRun.id)
        .where(
            TaskRun.benchmark_run_id == benchmark_run_id,
            TaskRun.phase == states.STARTED[0],
            TaskRun.status == states.STARTED[1],
        )
        .order_by(TaskRun.position)
    )
    return list(session.scalars(statement))


def is_due(benchmark_run: BenchmarkRun, task_runs: list[TaskRun], now: datetime) -> bool:
    """Whether a deadline or the token's expiry has passed without being applied yet."""
    return any(_due_event(benchmark_run, task_run, now) for task_run in task_runs)


def settle_task_run(session: Session, benchmark_run: BenchmarkRun, task_run: TaskRun, now: datetime) -> bool:
    """Apply a passed deadline or token expiry to one task run (its row lock held); True if it ended."""
    event = _due_event(benchmark_run, task_run, now)
    if event is None:
        return False
    released = int(states.is_running((task_run.phase, task_run.status)))
    end_task_run(session, task_run, event, now)
    count_ended(session, benchmark_run.id, now, ended=1, released=released)
    return True


def settle_due(
    session: Session, benchmark_run: BenchmarkRun, now: datetime, *, skip_locked: bool = False
) -> int:
    """Apply passed deadlines and token expiry to the run's task runs that are due: only those are
    read and locked (in position order); with `skip_locked`, rows another transaction holds are
    left to it. Returns how many ended."""
    started = and_(
        TaskRun.phase == states.STARTED[0], TaskRun.status == states.STARTED[1], TaskRun.deadline_at <= now
    )
    due = [started]
    if benchmark_run.token_expires_at <= now:
        due.append(and_(TaskRun.phase == states.CREATED[0], TaskRun.status == states.CREATED[1]))
    statement = (
        select(TaskRun)
        .where(TaskRun.benchmark_run_id == benchmark_run.id, or_(*due))
        .order_by(TaskRun.position)
        .with_for_update(skip_locked=skip_locked)
        .execution_options(populate_existing=True)
    )
    ended = released = 0
    for task_run in session.scalars(statement).all():
        event = _due_event(benchmark_run, task_run, now)
        if event is None:  # ended meanwhile (the lock waited for its commit)
            continue
        released += int(states.is_running((task_run.phase, task_run.status)))
        end_task_run(session, task_run, event, now)
        ended += 1
    if ended:
        # Other task runs than a scoped caller's own (`start` making room): every cache hears.
        widen(session.connection())
        count_ended(session, benchmark_run.id, now, ended=ended, released=released)
    return ended


def _due_event(benchmark_run: BenchmarkRun, task_run: TaskRun, now: datetime) -> states.TaskEvent | None:
    current = (task_run.phase, task_run.status)
    return states.due_event(current, task_run.deadline_at, benchmark_run.token_expires_at, now)


def lock_run(session: Session, benchmark_run_id: str) -> tuple[BenchmarkRun, list[TaskRun]]:
    """Lock every task run of the run, then the run (the one lock order), re-reading both. For
    the verbs that change a whole run (cancel it, override a verdict), never for start or complete."""
    task_runs = task_runs_of(session, benchmark_run_id, lock=True)
    statement = (
        select(BenchmarkRun)
        .where(BenchmarkRun.id == benchmark_run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return session.scalars(statement).one(), task_runs


def settle_if_due(session: Session, benchmark_run: BenchmarkRun, now: datetime) -> list[TaskRun]:
    """The lazy half of the timeouts of docs/api.md: on read, apply what is due (locking only what is)."""
    task_runs = task_runs_of(session, benchmark_run.id)
    if is_due(benchmark_run, task_runs, now):
        settle_due(session, benchmark_run, now)
        # Ended here, or by the sweeper or another request while this one waited for the rows'
        # locks (then the rows no longer match what is due and were not re-read): read them again,
        # in one statement.
        task_runs = task_runs_of(session, benchmark_run.id, fresh=True)
        session.refresh(benchmark_run)
    elif sum(states.is_ended(task_run.status) for task_run in task_runs) != benchmark_run.task_runs_ended:
        # The run was read before an end committed (the sweeper's, another request's) and its task
        # runs after it (PostgreSQL's READ COMMITTED: a snapshot per statement): read the run
        # again, so the answer never shows every task run ended under a run still started.
        session.refresh(benchmark_run)
    return task_runs
