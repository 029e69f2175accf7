"""The transition table of SPEC §1.1 (`service/runs/states.py`): every terminal status means phase
`completed`, and events with no entry are conflicts."""

from __future__ import annotations

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
