"""Every phase/status transition of benchmark and task runs, in one table (docs/api.md).

A run's state is `(phase, status)`. Any terminal status means phase `completed`. An event that
has no entry for the current state is illegal and the action answers 409.

Task run::

    (created, active) ──start──▶ (started, active) ──complete──▶ (completed, completed)
          │  ╰─fail/cancel/expire─▶ (completed, failed|cancelled)  ├─time_out──▶ (completed, timed_out)
          │                                                        ├─cancel────▶ (completed, cancelled)
          │                                                        ╰─fail──────▶ (completed, failed)

Benchmark run::

    (created, active) ──start──▶ (started, active) ──finalize──▶ (completed, completed)
          ╰──────────── cancel (from either) ───────────────────▶ (completed, cancelled)
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from assay.store import Conflict

__all__ = [
    "BENCHMARK_RUN",
    "ENDED",
    "TASK_RUN",
    "RunState",
    "TaskEvent",
    "due_event",
    "is_ended",
    "is_running",
    "next_state",
]

RunState = tuple[str, str]
TaskEvent = Literal["start", "complete", "time_out", "cancel", "fail", "expire"]
BenchmarkEvent = Literal["start", "finalize", "cancel"]

CREATED: RunState = ("created", "active")
STARTED: RunState = ("started", "active")

TASK_RUN: dict[tuple[RunState, str], RunState] = {
    (CREATED, "start"): STARTED,
    (CREATED, "fail"): ("completed", "failed"),
    (CREATED, "cancel"): ("completed", "cancelled"),
    (CREATED, "expire"): ("completed", "cancelled"),
    (STARTED, "complete"): ("completed", "completed"),
    (STARTED, "time_out"): ("completed", "timed_out"),
    (STARTED, "cancel"): ("completed", "cancelled"),
    (STARTED, "fail"): ("completed", "failed"),
}

BENCHMARK_RUN: dict[tuple[RunState, str], RunState] = {
    (CREATED, "start"): STARTED,
    (STARTED, "start"): STARTED,
    (CREATED, "finalize"): ("completed", "completed"),
    (STARTED, "finalize"): ("completed", "completed"),
    (CREATED, "cancel"): ("completed", "cancelled"),
    (STARTED, "cancel"): ("completed", "cancelled"),
}

ENDED = frozenset({"completed", "cancelled", "failed", "timed_out"})


def is_ended(status: str) -> bool:
    return status in ENDED


def is_running(current: RunState) -> bool:
    """Started and not yet ended: the state that holds a playground and counts against concurrency."""
    return current == STARTED


def due_event(
    current: RunState, deadline_at: datetime | None, token_expires_at: datetime, now: datetime
) -> TaskEvent | None:
    """The event a clock has made due for a task run: `time_out` once a started run's deadline has
    passed, `expire` once the run token has expired on a run that never started (docs/api.md)."""
    if current == STARTED and deadline_at is not None and deadline_at <= now:
        return "time_out"
    if current == CREATED and token_expires_at <= now:
        return "expire"
    return None


def next_state(
    table: dict[tuple[RunState, str], RunState], current: RunState, event: str, what: str
) -> RunState:
    """The state after `event`, or `Conflict` naming the run and why."""
    target = table.get((current, event))
    if target is None:
        phase, status = current
        raise Conflict(f"{what} is {status} ({phase}); cannot {event.replace('_', ' ')} it")
    return target
