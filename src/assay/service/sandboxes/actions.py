"""What the sandbox surfaces' dependency reads about a run token's task runs (`routes.py`): one
read-only unit of work, only the columns the check needs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, select

from assay.store import Caller, Database
from assay.store.models import Sandbox, TaskRun

__all__ = ["read_rows"]

_COLUMNS = (
    TaskRun.id,
    TaskRun.org_id,
    TaskRun.phase,
    TaskRun.status,
    TaskRun.deadline_at,
    TaskRun.playground_id,
    Sandbox.id.label("sandbox_id"),
    Sandbox.credentials,
)


def read_rows(database: Database, caller: Caller, surface: str, task_run_id: str | None) -> list[Any]:
    """The caller's task run `task_run_id` (all of its benchmark run's when None), in position
    order, each with its `surface` sandbox row (or None): no write lock (`Database.reading`)."""
    where = () if task_run_id is None else (TaskRun.id == task_run_id,)
    sandbox = and_(Sandbox.playground_id == TaskRun.playground_id, Sandbox.type == surface)
    statement = (
        select(*_COLUMNS)
        .outerjoin(Sandbox, sandbox)
        .where(TaskRun.org_id == caller.org_id, TaskRun.benchmark_run_id == caller.benchmark_run_id, *where)
        .order_by(TaskRun.position)
    )
    with database.reading() as session:
        return list(session.execute(statement))
