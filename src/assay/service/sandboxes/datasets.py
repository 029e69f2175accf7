"""Which datasets a task run's playground loads, in SPEC §5.1 order: the environment's, then the task's.

A run of a published version reads the dataset contents frozen at publish time; a run of the draft
reads the current rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.sandboxes.settings import run_environment
from assay.store.models import BenchmarkRun, BenchmarkVersion, Dataset, TaskRun

__all__ = ["datasets_for"]


def datasets_for(session: Session, benchmark_run: BenchmarkRun, task_run: TaskRun) -> list[dict[str, Any]]:
    """`[{id, type, data}]` in load order; ids named twice load once, at their first place."""
    environment = run_environment(session, benchmark_run)
    named = [*(environment.get("dataset_ids") or []), *(task_run.snapshot["task"].get("dataset_ids") or [])]
    ordered = list(dict.fromkeys(map(str, named)))
    if benchmark_run.version_id:
        version = session.get(BenchmarkVersion, benchmark_run.version_id)
        by_id = (version.frozen if version is not None else {}).get("datasets") or {}
        return [_shape(by_id[ident]) for ident in ordered if ident in by_id]
    rows = session.scalars(
        select(Dataset).where(Dataset.org_id == task_run.org_id, Dataset.id.in_(ordered))
    ).all()
    found = {row.id: {"id": row.id, "type": row.type, "data": row.data} for row in rows}
    return [found[ident] for ident in ordered if ident in found]


def _shape(dataset: dict[str, Any]) -> dict[str, Any]:
    return {"id": dataset.get("id"), "type": dataset.get("type"), "data": dataset.get("data")}
