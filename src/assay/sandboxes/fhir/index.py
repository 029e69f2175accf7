"""The in-process view of one playground's FHIR store: its layer plus the versions written since.

Each API worker keeps one `StoreIndex` per store it has served and brings it up to date from SQL
by sequence number before every use (`refresh`), so several uvicorn workers stay correct without
talking to each other. Until the playground writes, searches run on the layer's shared index;
the first write gives the playground an index of its own (copy on write).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from assay.formats.fhir import FhirStore
from assay.sandboxes.fhir.layers import Layer
from assay.sandboxes.fhir.tables import FhirStoreRow, FhirVersion

__all__ = ["Current", "StoreIndex", "VersionRow"]

Key = tuple[str, str]

_GENERATIONS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Current:
    """The latest version of one resource; `resource` is None when that version is a delete."""

    version_id: str
    deleted: bool
    resource: dict[str, Any] | None
    versions: int
    """How many versions the resource has (for non-numeric version ids)."""


@dataclass(frozen=True, slots=True)
class VersionRow:
    seq: int
    resource_type: str
    resource_id: str
    version_id: str
    last_updated: str
    deleted: bool
    body: str | None

    def resource(self) -> dict[str, Any] | None:
        return None if self.body is None else json.loads(self.body)


def version_rows(rows: Iterable[Any]) -> list[VersionRow]:
    return [
        VersionRow(r.seq, r.resource_type, r.resource_id, r.version_id, r.last_updated, r.deleted, r.body)
        for r in rows
    ]


_VERSION_COLUMNS = (
    FhirVersion.seq,
    FhirVersion.resource_type,
    FhirVersion.resource_id,
    FhirVersion.version_id,
    FhirVersion.last_updated,
    FhirVersion.deleted,
    FhirVersion.body,
)


class StoreIndex:
    """Current resources of one store as of `seq`; every method runs under `lock`."""

    def __init__(self, store_id: str, layer: Layer | None, strict: bool = True):
        self.store_id = store_id
        self.generation = next(_GENERATIONS)
        """Unique to this index in this process: with `seq`, names the state it holds (a store
        dropped and created again, or an index evicted and rebuilt, starts a new generation)."""
        self.layer = layer
        self.strict = strict
        """Validate every written version (`validation.py`); False for a lenient playground."""
        self.seq = 0
        self.refreshed_at: bytes | None = None
        """The change epoch read just before the index was last brought up to the store's current
        sequence (`EmbeddedFhir.reading`); None when that is not known."""
        self.overlay: dict[Key, Current] = {}
        self._own: FhirStore | None = None
        self.lock = threading.RLock()

    @property
    def search_index(self) -> FhirStore:
        if self._own is not None:
            return self._own
        if self.layer is not None:
            return self.layer.index()
        self._own = FhirStore(())
        return self._own

    def current(self, key: Key) -> Current | None:
        found = self.overlay.get(key)
        if found is not None:
            return found
        if self.layer is None:
            return None
        base = self.layer.by_key.get(key)
        if base is None:
            return None
        return Current(str(base.get("meta", {}).get("versionId", "1")), False, base, 1)

    def refresh(self, conn: Connection, upto: int | None = None) -> None:
        """Apply the versions written since `seq` (by any worker), up to the store's current
        sequence or, when given, up to `upto` (a capture's; then the store row is not read)."""
        latest = (
            upto
            if upto is not None
            else conn.execute(select(FhirStoreRow.seq).where(FhirStoreRow.id == self.store_id)).scalar()
        )
        if latest is None or latest <= self.seq:
            return
        rows = conn.execute(
            select(*_VERSION_COLUMNS)
            .where(
                FhirVersion.store_id == self.store_id, FhirVersion.seq > self.seq, FhirVersion.seq <= latest
            )
            .order_by(FhirVersion.seq)
        )
        self.apply(version_rows(rows), latest)

    def apply(self, rows: list[VersionRow], seq: int) -> None:
        """Apply `rows` (consecutive, after `self.seq`) and move to `seq`."""
        if not rows:
            self.seq = max(self.seq, seq)
            return
        if self._own is None:
            base = self.layer.by_key.values() if self.layer is not None else ()
            self._own = FhirStore(base)
        for row in rows:
            key = (row.resource_type, row.resource_id)
            before = self.current(key)
            count = (before.versions if before else 0) + 1
            if row.deleted:
                self.overlay[key] = Current(row.version_id, True, None, count)
                self._own.delete(*key)
            else:
                resource = row.resource()
                assert resource is not None
                self.overlay[key] = Current(row.version_id, False, resource, count)
                self._own.put(resource)
        self.seq = seq
