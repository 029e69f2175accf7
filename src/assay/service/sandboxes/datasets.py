"""Which datasets a task run's playground loads, in SPEC §5.1 order: the environment's, then the task's.

A run of a published version reads the dataset contents frozen at publish time; a run of the draft
reads the current rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.sandboxes import RunEnvironment
from assay.store.models import Dataset, TaskRun

__all__ = ["datasets_for"]


def datasets_for(session: Session, task_run: TaskRun, environment: RunEnvironment) -> list[dict[str, Any]]:
    """`[{id, type, data}]` in load order; ids named twice load once, at their first place.

    `environment` is `sandboxes.run_environment(...)`, read once by `start`.
    """
    named = [*environment.dataset_ids, *(task_run.snapshot["task"].get("dataset_ids") or [])]
    ordered = list(dict.fromkeys(map(str, named)))
    if environment.frozen_datasets is not None:
        by_id = environment.frozen_datasets
        return [_shape(by_id[ident]) for ident in ordered if ident in by_id]
    rows = session.scalars(
        select(Dataset).where(Dataset.org_id == task_run.org_id, Dataset.id.in_(ordered))
    ).all()
    found = {row.id: {"id": row.id, "type": row.type, "data": row.data} for row in rows}
    return [found[ident] for ident in ordered if ident in found]


def _shape(dataset: dict[str, Any]) -> dict[str, Any]:
    return {"id": dataset.get("id"), "type": dataset.get("type"), "data": dataset.get("data")}
