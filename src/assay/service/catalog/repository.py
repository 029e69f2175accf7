"""Caller-scoped catalog queries: every statement starts from `owned(model, caller)`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from assay.store import Caller, get_owned, owned
from assay.store.models import (
    Benchmark,
    BenchmarkRun,
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
}


def get(session: Session, model: type[Any], caller: Caller, ident: str) -> Any:
    return get_owned(session, model, caller, ident, NOUNS[model])


def criteria_of(session: Session, caller: Caller, task_id: str) -> list[Criterion]:
    """A task's criteria in creation order (ids are monotonic ULIDs), SPEC §3.1 Order."""
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


def uses(session: Session, caller: Caller, model: type[Any], **where: Any) -> int:
    """How many rows of `model` in the caller's org match `where` (reference checks for DELETE)."""
    statement = select(func.count()).select_from(model).where(model.org_id == caller.org_id)
    for key, value in where.items():
        statement = statement.where(getattr(model, key) == value)
    return int(session.scalar(statement) or 0)


def runs_of_benchmark(session: Session, caller: Caller, benchmark_id: str) -> int:
    return uses(session, caller, BenchmarkRun, benchmark_id=benchmark_id)
