"""The transition table of SPEC §1.1 (`service/runs/states.py`): every terminal status means phase
`completed`, and events with no entry are conflicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assay.service.runs import states
from assay.store import Conflict


def test_terminal_statuses_complete_the_phase() -> None:
    for table in (states.TASK_RUN, states.BENCHMARK_RUN):
        for (_, _event), (phase, status) in table.items():
            assert (phase == "completed") == (status != "active")


@pytest.mark.parametrize(
    ("current", "event"),
    [
        (("created", "active"), "complete"),
        (("created", "active"), "time_out"),
        (("completed", "completed"), "start"),
        (("completed", "timed_out"), "complete"),
        (("completed", "cancelled"), "cancel"),
    ],
)
def test_illegal_task_run_events_conflict(current: tuple[str, str], event: str) -> None:
    with pytest.raises(Conflict, match="task run tr_x"):
        states.next_state(states.TASK_RUN, current, event, "task run tr_x")


def test_the_happy_path() -> None:
    state = states.next_state(states.TASK_RUN, states.CREATED, "start", "t")
    assert states.next_state(states.TASK_RUN, state, "complete", "t") == ("completed", "completed")
    assert states.is_ended("timed_out") and not states.is_ended("active")


def test_due_events_follow_the_clocks() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    past, future = now - timedelta(seconds=1), now + timedelta(seconds=1)
    assert states.due_event(states.STARTED, past, future, now) == "time_out"
    assert states.due_event(states.STARTED, future, past, now) is None  # a started run keeps its deadline
    assert states.due_event(states.STARTED, None, past, now) is None
    assert states.due_event(states.CREATED, None, past, now) == "expire"
    assert states.due_event(states.CREATED, None, future, now) is None
    assert states.due_event(("completed", "completed"), past, past, now) is None
    due = [states.due_event(state, past, past, now) for state in (states.STARTED, states.CREATED)]
    assert all(
        states.next_state(states.TASK_RUN, s, e or "", "t")
        for s, e in zip((states.STARTED, states.CREATED), due, strict=True)
    )
    assert states.is_running(states.STARTED) and not states.is_running(states.CREATED)
