"""Which datasets a task run's playground loads, in order: the environment's, then the task's.

A run of a published version reads the dataset contents frozen at publish time (a row each in
`benchmark_version_datasets`); a run of the draft reads the current rows. A draft's contents are read only when a surface asks for one (`data`):
the FHIR surface finds its layer by the stored content hashes and, when the layer exists, reads no
dataset at all (a warm `start` of 1,024 patients spent 63% re-reading and decoding them).
A content is read as its JSON text and decoded by `load_json` (`core.json_decode.loads`: orjson
where it reads the same).

`start` prepares the datasets before its transaction (`actions.prepare_start`) with `reading`:
each content is then read in a unit of work of its own, so no read snapshot stays open while the
layer built from them is stored (on SQLite an open snapshot kept the WAL from being checkpointed:
it grew to ~700 MB at 1,024 patients and the next commit after the build checkpointed all of it
holding the write lock, 1.5-2.4 s in which no other request was answered).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from assay.core.json_decode import loads
from assay.sandboxes import RunEnvironment
from assay.store.models import BenchmarkVersionDataset, Dataset, TaskRun

__all__ = ["DatasetChanged", "StoredDataset", "datasets_for"]


def load_json(text: str | bytes) -> Any:
    """A stored dataset's content: nested at most `MAX_JSON_DEPTH` (refused deeper at upload)."""
    return loads(text, shallow=True)


Reading = Callable[[], AbstractContextManager[Session]]
"""A read-only unit of work of its own (`Database.reading`)."""


class DatasetChanged(RuntimeError):
    """A dataset's content changed (or it was deleted) after `datasets_for` read its hash: what is
    read no longer has the content the layer key names, so nothing may be built from it."""


_NOT_READ = object()


class StoredDataset(Mapping[str, Any]):
    """One dataset as the surfaces see it: `id`, `type`, `hash` (its content hash, None when it
    was stored before hashes were) and `data`, read on first access.

    `data` is decoded for this `start` alone: the surface that loads it may rewrite it in place
    (the FHIR layer does, instead of copying every resource). A dataset whose stored text is read
    in a unit of work of its own can have that read started on another thread (`read_ahead`,
    `sandboxes.read_ahead.contents`); the decoding stays with whoever asks for `data`.
    """

    _KEYS = ("id", "type", "hash", "data")

    def __init__(
        self,
        ident: str,
        kind: str,
        content_hash: str | None,
        fetch: Callable[[], Any],
        *,
        decode: Callable[[Any], Any] | None = None,
        own_unit_of_work: bool = False,
    ):
        self._fields: dict[str, Any] = {"id": ident, "type": kind, "hash": content_hash}
        self._fetch = fetch
        self._decode = decode or load_json
        self._own_unit_of_work = own_unit_of_work
        self._pending: Future[Any] | None = None
        self._data: Any = _NOT_READ
        self.reads = 0
        """How many times `data` was read from the database (0 or 1)."""

    def __getitem__(self, key: str) -> Any:
        if key != "data":
            return self._fields[key]
        if self._data is _NOT_READ:
            pending, self._pending = self._pending, None
            # Not started yet (the read-ahead threads are busy with other starts' reads): read it
            # here rather than wait behind them.
            stored = self._fetch() if pending is None or pending.cancel() else pending.result()
            self._data = self._decode(stored)
            self.reads += 1
        return self._data

    def read_ahead(self) -> None:
        """Start reading the stored text on the read-ahead thread (only when the read is a unit of
        work of its own: a caller's session is not for other threads)."""
        if self._own_unit_of_work and self._data is _NOT_READ and self._pending is None:
            self._pending = _READER.submit(self._fetch)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


_READER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="assay-dataset-read")
"""Reads ahead for every `start` of this process: its waits on the database hold no GIL."""


def datasets_for(
    session: Session, task_run: TaskRun, environment: RunEnvironment, *, reading: Reading | None = None
) -> list[StoredDataset]:
    """The datasets in load order; ids named twice load once, at their first place.

    `environment` is `sandboxes.run_environment(...)`, read once by `start`. With `reading`, each
    content is read later in a unit of work of its own instead of in `session` (which the caller
    may then close), and a draft dataset's content must still have the hash read here, else
    reading it raises `DatasetChanged`.
    """
    named = [*environment.dataset_ids, *(task_run.snapshot["task"].get("dataset_ids") or [])]
    ordered = list(dict.fromkeys(map(str, named)))
    if environment.frozen_datasets is not None:
        by_id, version_id = environment.frozen_datasets, environment.version_id
        return [_frozen(session, reading, version_id, by_id[ident]) for ident in ordered if ident in by_id]
    rows = session.execute(
        select(Dataset.id, Dataset.type, Dataset.content_hash).where(
            Dataset.org_id == task_run.org_id, Dataset.id.in_(ordered)
        )
    ).all()
    found = {row.id: _stored(session, reading, row.id, row.type, row.content_hash) for row in rows}
    return [found[ident] for ident in ordered if ident in found]


def _stored(
    session: Session, reading: Reading | None, ident: str, kind: str, content_hash: str | None
) -> StoredDataset:
    # The text, decoded by `StoredDataset`: never shared with the identity map, and read by orjson.
    statement = select(cast(Dataset.data, Text), Dataset.content_hash).where(Dataset.id == ident)
    if reading is None:
        return StoredDataset(ident, kind, content_hash, lambda: session.execute(statement).one()[0])

    def fetch() -> Any:
        with reading() as own:
            row = own.execute(statement).first()
        if row is None or row[1] != content_hash:
            raise DatasetChanged(f"dataset {ident} changed while its start was being prepared")
        return row[0]

    return StoredDataset(ident, kind, content_hash, fetch, own_unit_of_work=True)


def _frozen(
    session: Session, reading: Reading | None, version_id: str | None, dataset: dict[str, Any]
) -> StoredDataset:
    ident, kind = str(dataset.get("id")), str(dataset.get("type"))
    if "data" in dataset:  # published before migration 0008: the content is inline, never hashed
        data = dataset["data"]
        return StoredDataset(ident, kind, None, lambda: data, decode=lambda value: value)
    statement = select(cast(BenchmarkVersionDataset.data, Text)).where(
        BenchmarkVersionDataset.version_id == version_id, BenchmarkVersionDataset.dataset_id == ident
    )
    key = (str(version_id), ident)
    if reading is None:

        def fetch_here() -> Any:
            return _PUBLISHED.get(key) or _PUBLISHED.put(key, session.execute(statement).scalar_one())

        return StoredDataset(ident, kind, dataset.get("hash"), fetch_here)

    def fetch() -> Any:  # a published version's rows never change
        found = _PUBLISHED.get(key)
        if found is not None:
            return found
        with reading() as own:
            return _PUBLISHED.put(key, own.execute(statement).scalar_one())

    return StoredDataset(ident, kind, dataset.get("hash"), fetch, own_unit_of_work=True)


class _Texts:
    """Published dataset contents as stored text, by (version id, dataset id), least recently used
    first out past `budget` characters: a published version's contents never change, and each
    `start` of its runs read every small one (a payer, a portal, a phone line) again, one round
    trip each inside the transaction. The text is kept, never the decoded value: a surface may
    rewrite what it is handed. Contents over `largest` characters (the big FHIR bundles, read
    only to build a layer once) are not kept."""

    def __init__(self, budget: int = 8_000_000, largest: int = 256_000):
        self.budget, self.largest = budget, largest
        self.size = 0
        self.texts: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> str | None:
        with self.lock:
            found = self.texts.get(key)
            if found is not None:
                self.texts.move_to_end(key)
            return found

    def put(self, key: tuple[str, str], text: str) -> str:
        if not isinstance(text, str) or len(text) > self.largest:
            return text
        with self.lock:
            if key not in self.texts:
                self.texts[key] = text
                self.size += len(text)
            while self.size > self.budget:
                _, dropped = self.texts.popitem(last=False)
                self.size -= len(dropped)
        return text


_PUBLISHED = _Texts()
