"""Caller-scoped catalog queries: every statement starts from `owned(model, caller)`.

`get` and `delete` are the one place a catalog row is looked up by id, so another org's id is a 404
by construction (as Polar's `get_readable_statement` does); `delete` also owns the rule of docs/api.md
that a row still named by another row is a 409.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from assay.store import Caller, Conflict, get_owned, owned
from assay.store.models import (
    ApiKey,
    Benchmark,
    BenchmarkVersion,
    Criterion,
    Dataset,
    DatasetEntity,
    Environment,
    Solver,
    Task,
    TaskEntity,
)

__all__ = [
    "NOUNS",
    "criteria_of",
    "delete",
    "entities_by_id",
    "entities_of",
    "get",
    "latest_version",
    "missing_ids",
    "task_entity_ids",
    "tasks_of",
    "uses",
]

NOUNS: dict[type[Any], str] = {
    Dataset: "dataset",
    DatasetEntity: "entity",
    Environment: "environment",
    Benchmark: "benchmark",
    Task: "task",
    Criterion: "criterion",
    Solver: "solver",
    ApiKey: "key",
}


def get(session: Session, model: type[Any], caller: Caller, ident: str, **filters: Any) -> Any:
    """One row of the caller's org by id (and `filters`), else `NotFound` naming the noun and id."""
    return get_owned(session, model, caller, ident, NOUNS[model], **filters)


def delete(
    session: Session,
    model: type[Any],
    caller: Caller,
    ident: str,
    *,
    refused_while: Mapping[InstrumentedAttribute[Any], str] | None = None,
    **filters: Any,
) -> None:
    """Delete one row of the caller's org; 409 while a `refused_while` column still names it.

    `refused_while` maps a referencing column (`Task.benchmark_id`) to the Conflict message, with
    `{id}` for the row's id; the first column that still has a row wins.
    """
    row = get(session, model, caller, ident, **filters)
    for column, message in (refused_while or {}).items():
        if uses(session, caller, column, row.id):
            raise Conflict(message.format(id=row.id))
    session.delete(row)


def uses(session: Session, caller: Caller, column: InstrumentedAttribute[Any], value: str) -> int:
    """How many rows of the caller's org have `column == value` (reference checks for DELETE)."""
    model = column.class_
    statement = select(func.count()).select_from(model).where(model.org_id == caller.org_id, column == value)
    return int(session.scalar(statement) or 0)


def criteria_of(session: Session, caller: Caller, task_id: str) -> list[Criterion]:
    """A task's criteria in creation order (ids are monotonic ULIDs), docs/assertions.md."""
    statement = owned(Criterion, caller).where(Criterion.task_id == task_id).order_by(Criterion.id)
    return list(session.scalars(statement))


def tasks_of(session: Session, caller: Caller, benchmark_id: str) -> list[Task]:
    statement = owned(Task, caller).where(Task.benchmark_id == benchmark_id).order_by(Task.id)
    return list(session.scalars(statement))


def entities_of(session: Session, caller: Caller, dataset_id: str) -> list[DatasetEntity]:
    statement = owned(DatasetEntity, caller).where(DatasetEntity.dataset_id == dataset_id)
    return list(session.scalars(statement.order_by(DatasetEntity.id)))


def entities_by_id(session: Session, caller: Caller, ids: set[str]) -> dict[str, DatasetEntity]:
    if not ids:
        return {}
    rows = session.scalars(owned(DatasetEntity, caller).where(DatasetEntity.id.in_(ids)))
    return {row.id: row for row in rows}


def task_entity_ids(session: Session, caller: Caller, task_id: str) -> list[str]:
    statement = (
        select(TaskEntity.entity_id)
        .where(TaskEntity.org_id == caller.org_id, TaskEntity.task_id == task_id)
        .order_by(TaskEntity.created_at, TaskEntity.entity_id)
    )
    return list(session.scalars(statement))


def missing_ids(session: Session, model: type[Any], caller: Caller, ids: list[str]) -> list[str]:
    """The ids in `ids` that the caller's org does not have."""
    if not ids:
        return []
    found = set(session.scalars(select(model.id).where(model.org_id == caller.org_id, model.id.in_(ids))))
    return [ident for ident in ids if ident not in found]


def latest_version(session: Session, caller: Caller, slug: str) -> BenchmarkVersion | None:
    statement = (
        owned(BenchmarkVersion, caller)
        .where(BenchmarkVersion.slug == slug)
        .order_by(BenchmarkVersion.version.desc())
        .limit(1)
    )
    return session.scalars(statement).first()
