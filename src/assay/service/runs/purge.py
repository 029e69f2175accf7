"""Deleting benchmark runs, which only self-test runs ever are: a benchmark whose runs are all
self-tests (an author's checks, `assay lint`'s throwaway draft) is deleted with them
(`catalog.actions.delete_benchmark`); any other run is kept for its record.

One transaction deletes the runs with everything that hangs off them: the playgrounds (torn down
first when still in use) with what each surface keeps (`sandboxes.purge_playgrounds`), the
sandboxes and their events, then the benchmark runs, whose task runs and criterion runs go by the
schema's `ON DELETE CASCADE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from assay.sandboxes import purge_playgrounds
from assay.store.models import BenchmarkRun, TaskRun

__all__ = ["SELF_TEST_AGENT", "delete_runs", "is_self_test"]

SELF_TEST_AGENT = "assay self-test"
"""The agent name a self-test's runs carry (`runs/self_test.py`)."""


def is_self_test(agent: Any) -> bool:
    return isinstance(agent, dict) and agent.get("name") == SELF_TEST_AGENT


def delete_runs(session: Session, benchmark_run_ids: Sequence[str]) -> None:
    """Delete these benchmark runs (already checked to be the caller's) and all they hold."""
    if not benchmark_run_ids:
        return
    task_run_ids = list(
        session.scalars(select(TaskRun.id).where(TaskRun.benchmark_run_id.in_(benchmark_run_ids)))
    )
    purge_playgrounds(session, task_run_ids)
    session.execute(
        delete(BenchmarkRun)
        .where(BenchmarkRun.id.in_(benchmark_run_ids))
        .execution_options(synchronize_session=False)
    )
