"""Which datasets a task run's playground loads, in SPEC §5.1 order: the environment's, then the task's.

A run of a published version reads the dataset contents frozen at publish time (a row each in
`benchmark_version_datasets`); a run of the draft reads the current rows. A draft's contents are read only when a surface asks for one (`data`):
the FHIR surface finds its layer by the stored content hashes and, when the layer exists, reads no
dataset at all (issue 9: a warm `start` of 1,024 patients spent 63% re-reading and decoding them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.sandboxes import RunEnvironment
from assay.store.models import BenchmarkVersionDataset, Dataset, TaskRun

__all__ = ["StoredDataset", "datasets_for"]

_NOT_READ = object()


class StoredDataset(Mapping[str, Any]):
    """One dataset as the surfaces see it: `id`, `type`, `hash` (its content hash, None when it
    was stored before hashes were) and `data`, read on first access.

    `data` is decoded for this `start` alone: the surface that loads it may rewrite it in place
    (the FHIR layer does, instead of copying every resource).
    """

    _KEYS = ("id", "type", "hash", "data")

    def __init__(self, ident: str, kind: str, content_hash: str | None, read: Callable[[], Any]):
        self._fields: dict[str, Any] = {"id": ident, "type": kind, "hash": content_hash}
        self._read = read
        self._data: Any = _NOT_READ
        self.reads = 0
        """How many times `data` was read from the database (0 or 1)."""

    def __getitem__(self, key: str) -> Any:
        if key != "data":
            return self._fields[key]
        if self._data is _NOT_READ:
            self._data = self._read()
            self.reads += 1
        return self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


def datasets_for(session: Session, task_run: TaskRun, environment: RunEnvironment) -> list[StoredDataset]:
    """The datasets in load order; ids named twice load once, at their first place.

    `environment` is `sandboxes.run_environment(...)`, read once by `start`.
    """
    named = [*environment.dataset_ids, *(task_run.snapshot["task"].get("dataset_ids") or [])]
    ordered = list(dict.fromkeys(map(str, named)))
    if environment.frozen_datasets is not None:
        by_id, version_id = environment.frozen_datasets, environment.version_id
        return [_frozen(session, version_id, by_id[ident]) for ident in ordered if ident in by_id]
    rows = session.execute(
        select(Dataset.id, Dataset.type, Dataset.content_hash).where(
            Dataset.org_id == task_run.org_id, Dataset.id.in_(ordered)
        )
    ).all()
    found = {
        row.id: StoredDataset(row.id, row.type, row.content_hash, _reader(session, row.id)) for row in rows
    }
    return [found[ident] for ident in ordered if ident in found]


def _reader(session: Session, ident: str) -> Callable[[], Any]:
    # A column, not the entity: the value is decoded afresh, never shared with the identity map.
    return lambda: session.execute(select(Dataset.data).where(Dataset.id == ident)).scalar_one()


def _frozen(session: Session, version_id: str | None, dataset: dict[str, Any]) -> StoredDataset:
    ident, kind = str(dataset.get("id")), str(dataset.get("type"))
    if "data" in dataset:  # published before migration 0008: the content is inline, never hashed
        data = dataset["data"]
        return StoredDataset(ident, kind, None, lambda: data)
    return StoredDataset(ident, kind, dataset.get("hash"), _version_reader(session, version_id, ident))


def _version_reader(session: Session, version_id: str | None, ident: str) -> Callable[[], Any]:
    statement = select(BenchmarkVersionDataset.data).where(
        BenchmarkVersionDataset.version_id == version_id, BenchmarkVersionDataset.dataset_id == ident
    )
    return lambda: session.execute(statement).scalar_one()
