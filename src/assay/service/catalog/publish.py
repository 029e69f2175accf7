"""Freezing: what a task run and a published `slug@version` keep, so later edits change nothing.

A frozen task is `{task, criteria, entities}`: the task object (its `input_entity` resolved to the
entity's data, so `assay verify` on a run's snapshot reads the same entity), its criteria in
creation order, and the data of every entity a criterion or the task names. Publishing freezes
every task plus the environment settings and dataset contents (docs/api.md).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from assay.service.catalog import repository as repo
from assay.service.catalog.schemas import (
    PublishBody,
    benchmark_json,
    criterion_json,
    dataset_json,
    entity_reference,
    environment_json,
    task_json,
)
from assay.store import Caller, Conflict, new_id, owned, utcnow
from assay.store.json_values import content_hash
from assay.store.models import (
    Benchmark,
    BenchmarkVersion,
    BenchmarkVersionDataset,
    Dataset,
    Environment,
    Task,
)

__all__ = ["freeze_benchmark", "freeze_task", "publish_benchmark", "slugify"]


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:100] or "benchmark"


def freeze_task(session: Session, caller: Caller, task: Task) -> dict[str, Any]:
    criteria = repo.criteria_of(session, caller, task.id)
    wanted = {c.input_entity_id for c in criteria if c.input_entity_id}
    wanted.update(repo.task_entity_ids(session, caller, task.id))
    reference = entity_reference(task.input_entity)
    if reference:
        wanted.add(reference)
    entities = {ident: row.data for ident, row in repo.entities_by_id(session, caller, wanted).items()}
    frozen_task = task_json(task)
    if reference:
        frozen_task["input_entity"] = entities.get(reference)
        frozen_task["input_entity_id"] = reference
    return {
        "task": frozen_task,
        "criteria": [criterion_json(criterion) for criterion in criteria],
        "entities": entities,
    }


def freeze_benchmark(session: Session, caller: Caller, benchmark: Benchmark) -> dict[str, Any]:
    environment = (
        repo.get(session, Environment, caller, benchmark.environment_id) if benchmark.environment_id else None
    )
    tasks = [freeze_task(session, caller, task) for task in repo.tasks_of(session, caller, benchmark.id)]
    dataset_ids = list(environment.dataset_ids) if environment else []
    for frozen in tasks:
        dataset_ids += [ident for ident in frozen["task"]["dataset_ids"] if ident not in dataset_ids]
    datasets = {}
    for dataset in session.scalars(owned(Dataset, caller).where(Dataset.id.in_(dataset_ids))):
        datasets[dataset.id] = dataset_json(dataset, repo.entities_of(session, caller, dataset.id))
        datasets[dataset.id]["hash"] = dataset.content_hash or content_hash(dataset.data)
    return {
        "benchmark": benchmark_json(benchmark),
        "environment": environment_json(environment) if environment else None,
        "datasets": datasets,
        "tasks": tasks,
    }


def _store_dataset_contents(session: Session, version: BenchmarkVersion) -> None:
    """Move each frozen dataset's `data` into its own row; `frozen` keeps the rest, its content
    `hash` included (`BenchmarkVersionDataset`: a run reads only the contents it needs)."""
    for ident, dataset in version.frozen["datasets"].items():
        data = dataset.pop("data")
        session.add(BenchmarkVersionDataset(version_id=version.id, dataset_id=ident, data=data))


def publish_benchmark(
    session: Session, caller: Caller, benchmark_id: str, body: PublishBody
) -> BenchmarkVersion:
    """Freeze the draft as the next version of its slug (unique per org, fixed at first publish)."""
    benchmark = repo.get(session, Benchmark, caller, benchmark_id)
    slug = body.slug or benchmark.slug or slugify(benchmark.name)
    if benchmark.slug and slug != benchmark.slug:
        raise Conflict(f"benchmark {benchmark.id} is published as {benchmark.slug!r}; its slug cannot change")
    holder = session.scalars(
        owned(Benchmark, caller).where(Benchmark.slug == slug, Benchmark.id != benchmark.id)
    )
    if holder.first() is not None:
        raise Conflict(f"slug {slug!r} is taken by another benchmark", {"slug": ["already in use"]})
    benchmark.slug = slug
    last = session.scalar(
        select(func.max(BenchmarkVersion.version)).where(
            BenchmarkVersion.org_id == caller.org_id, BenchmarkVersion.slug == slug
        )
    )
    version = BenchmarkVersion(
        id=new_id("bmv_"),
        org_id=caller.org_id,
        benchmark_id=benchmark.id,
        slug=slug,
        version=(last or 0) + 1,
        name=benchmark.name,
        frozen=freeze_benchmark(session, caller, benchmark),
        created_at=utcnow(),
    )
    _store_dataset_contents(session, version)
    session.add(version)
    session.flush()
    return version
