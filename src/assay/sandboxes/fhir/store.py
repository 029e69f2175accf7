"""`EmbeddedFhir`: the built-in versioned FHIR R4 store behind every playground (docs/sandboxes.md,
docs/snapshots.md).

Reads go through a per-process `StoreIndex` refreshed from SQL by sequence number. Writes run in one
database transaction that first updates the store's row in `fhir_stores` — the write lock — then
re-reads the index, checks preconditions against the now-current state, and appends version rows
with consecutive sequence numbers. Two `If-Match` writes racing on one resource therefore serialize:
the second sees the first's version and gets 412 (docs/sandboxes.md).

A capture is `(store_id, seq)`; `state_at` answers searches on the state as of that sequence.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Connection, Engine, Select, delete, func, insert, select, update

from assay.formats.fhir import FhirStore
from assay.sandboxes.fhir._db import using
from assay.sandboxes.fhir.answers import SearchAnswers
from assay.sandboxes.fhir.index import _VERSION_COLUMNS, Current, StoreIndex, VersionRow, version_rows
from assay.sandboxes.fhir.layers import LayerCache, LayerSource, insert_missing
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.resources import next_version, stamp
from assay.sandboxes.fhir.tables import FhirStoreRow, FhirVersion
from assay.sandboxes.fhir.validation import validate_resource
from assay.sandboxes.gate import SandboxClosed, admit_surface
from assay.snapshot import is_file_name
from assay.store.database import read_only
from assay.store.epoch import epoch_of
from assay.store.ids import iso, utcnow
from assay.store.models import Sandbox

__all__ = [
    "CACHED_ONLY",
    "SEEDING",
    "STRICT_KEY",
    "EmbeddedFhir",
    "NeedsDatabase",
    "WriteTransaction",
    "capture_read",
    "embedded_fhir",
    "is_strict",
]

SEEDING: ContextVar[bool] = ContextVar("fhir_seeding", default=False)
"""True while a trusted caller seeds a dataset through the REST surface (`routes.py`, only where
`FhirSurface.trusts_seeding`): its writes skip validation, as dataset loading does."""

CACHED_ONLY: ContextVar[bool] = ContextVar("fhir_cached_only", default=False)
"""True while a read is served on the event loop (`routes.py`): `reading` may not touch SQL or
wait for a lock, and raises `NeedsDatabase` instead; the caller runs it again on a worker thread."""


class NeedsDatabase(Exception):
    """Serving this read needs SQL (an index not known current, or not built) or a busy lock."""


Key = tuple[str, str]
MAX_INDEXES = 256
"""Store indexes one process keeps (least recently used first out; a store torn down in another
worker is never `forget`-ed here, so the bound is what keeps memory flat)."""


class WriteTransaction:
    """The writes of one request (one resource, or a whole transaction bundle), applied atomically."""

    def __init__(self, index: StoreIndex, conn: Connection, now: str):
        self.index = index
        self.conn = conn
        self.now = now
        self.base_seq = index.seq
        self._pending: dict[Key, Current] = {}
        self.rows: list[VersionRow] = []

    def current(self, resource_type: str, resource_id: str) -> Current | None:
        key = (resource_type, resource_id)
        if key in self._pending:
            return self._pending[key]
        with self.index.lock:
            return self.index.current(key)

    def search(self, resource_type: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Search the state as it was when the transaction began (FHIR conditional semantics)."""
        with self.index.lock:
            return self.index.search_index.search(resource_type, params)

    def written(self, resource_type: str) -> dict[str, dict[str, Any] | None]:
        """id → what this transaction wrote so far for `resource_type` (None for a delete)."""
        return {rid: c.resource for (kind, rid), c in self._pending.items() if kind == resource_type}

    def put(self, resource: dict[str, Any], resource_id: str) -> dict[str, Any]:
        """Write a new version of `resource` as `resource_id`; the stored (stamped) resource.

        Every write of the REST surface (create, update, patch, transaction and batch entries)
        passes here, so a validating store validates here once (400 rolls the whole write back).
        """
        kind = resource["resourceType"]
        if not is_file_name(resource_id):  # FHIR's id pattern allows `.` and `..`
            raise FhirError(
                422,
                f"id {resource_id!r} cannot be stored: a captured resource is the file "
                f"fhir/{kind}/<id>.json (docs/snapshots.md), and {resource_id!r} names no file",
            )
        before = self.current(kind, resource_id)
        version = next_version(before.version_id if before else None, before.versions if before else 0)
        stored = stamp(resource, resource_id, version, self.now)
        if self.index.strict and not SEEDING.get():
            validate_resource(stored)
        self._append(kind, resource_id, version, stored, before)
        return stored

    def delete(self, resource_type: str, resource_id: str) -> str:
        """Write a delete version; its version id."""
        before = self.current(resource_type, resource_id)
        version = next_version(before.version_id if before else None, before.versions if before else 0)
        self._append(resource_type, resource_id, version, None, before)
        return version

    def _append(
        self, kind: str, rid: str, version: str, stored: dict[str, Any] | None, before: Current | None
    ) -> None:
        seq = self.base_seq + len(self.rows) + 1
        body = None if stored is None else json.dumps(stored, separators=(",", ":"))
        self.rows.append(VersionRow(seq, kind, rid, version, self.now, stored is None, body))
        count = (before.versions if before else 0) + 1
        self._pending[(kind, rid)] = Current(version, stored is None, stored, count)


class EmbeddedFhir:
    """All embedded FHIR stores of this deployment (one per playground), over one SQL engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.read_engine = read_only(engine)
        """Reads (searches, reads, history) take no write lock: a plain `BEGIN` on SQLite."""
        self.layers = LayerCache(engine)
        self.answers = SearchAnswers()
        """Rendered search answers by store state (`answers.py`), for the HTTP routes."""
        self.epoch = epoch_of(engine)
        """Moves on every committed change (`store/epoch.py`): an index refreshed at the current
        epoch is current without reading the store's row."""
        self._indexes: OrderedDict[str, StoreIndex] = OrderedDict()
        self._lock = threading.Lock()
        self.lenient = False
        """Writes to a store without a playground row get the structural checks only (a
        standalone `assay fhir-server` run with `ASSAY_FHIR_LENIENT=1` sets it)."""

    # -- provisioning --------------------------------------------------------------------------

    def provision(
        self, store_id: str, bundles: Sequence[Any] | LayerSource = (), conn: Connection | None = None
    ) -> None:
        """Create store `store_id` seeded with `bundles` (docs/sandboxes.md); a no-op when it exists.

        A `LayerSource` names its layer by the datasets' stored hashes and reads them only when
        that layer must be built."""
        source = bundles if isinstance(bundles, LayerSource) else LayerSource.of(bundles) if bundles else None
        layer = self.layers.ensure(source, conn) if source is not None else None
        with using(self.engine, conn) as db:  # one statement: a `start` provisions a new store
            db.execute(
                insert_missing(db.engine, FhirStoreRow),
                [{"id": store_id, "layer_hash": layer, "seq": 0, "created_at": utcnow()}],
            )

    def exists(self, store_id: str, conn: Connection | None = None) -> bool:
        with using(self.engine, conn) as db:
            return db.execute(select(FhirStoreRow.id).where(FhirStoreRow.id == store_id)).first() is not None

    def forget(self, store_id: str) -> None:
        """Drop this process's index of a store (its playground was torn down); SQL keeps it all."""
        with self._lock:
            self._indexes.pop(store_id, None)

    def drop(self, store_id: str) -> bool:
        """Delete store `store_id` with every version it wrote; False when there is none.

        For a standalone FHIR server's `DELETE /stores/{id}` (`service/fhir_server.py`); playground
        stores are kept (their captures point into them). The dataset layer stays: layers are
        shared by content hash. The row goes first, as a write locks it first: a write in flight
        commits before the versions are deleted (with them), and a later one finds no store.
        """
        with self.engine.begin() as conn:
            dropped = conn.execute(delete(FhirStoreRow).where(FhirStoreRow.id == store_id)).rowcount
            conn.execute(delete(FhirVersion).where(FhirVersion.store_id == store_id))
        self.forget(store_id)
        return bool(dropped)

    def _index(self, store_id: str, conn: Connection) -> StoreIndex:
        with self._lock:
            found = self._indexes.get(store_id)
            if found is not None:
                self._indexes.move_to_end(store_id)
        if found is not None:
            return found
        row = conn.execute(
            select(FhirStoreRow.layer_hash, Sandbox.credentials)
            .outerjoin(Sandbox, (Sandbox.playground_id == FhirStoreRow.id) & (Sandbox.type == "fhir"))
            .where(FhirStoreRow.id == store_id)
        ).first()  # one round trip for both (a `complete` on a worker that never served the run)
        if row is None:
            raise FhirError(404, f"no FHIR store {store_id}")
        layer = self.layers.get(row.layer_hash, conn) if row.layer_hash else None
        strict = is_strict(row.credentials, self.lenient)
        with self._lock:
            index = self._indexes.setdefault(store_id, StoreIndex(store_id, layer, strict))
            while len(self._indexes) > MAX_INDEXES:
                self._indexes.popitem(last=False)  # rebuilt from SQL if that store is used again
            return index

    # -- reading -------------------------------------------------------------------------------

    @contextmanager
    def reading(self, store_id: str, conn: Connection | None = None) -> Iterator[StoreIndex]:
        """The store's index, current as of now, locked for the caller.

        No SQL when nothing was committed anywhere since the index was last brought up to date
        (the epoch it was refreshed at is still the current one, `store/epoch.py`); else the
        store's row is read (and the versions written since applied), as always. Under
        `CACHED_ONLY`, whatever would need SQL or wait for the index's lock raises `NeedsDatabase`.
        """
        stamp = self.epoch.current() if conn is None else None
        if stamp is not None:
            with self._lock:
                index = self._indexes.get(store_id)
                if index is not None:
                    self._indexes.move_to_end(store_id)
            if index is not None and index.refreshed_at == stamp:
                if not index.lock.acquire(blocking=not CACHED_ONLY.get()):
                    raise NeedsDatabase(store_id)
                if index.refreshed_at == stamp:  # no write applied while we waited
                    try:
                        yield index
                    finally:
                        index.lock.release()
                    return
                index.lock.release()
        if CACHED_ONLY.get():
            raise NeedsDatabase(store_id)
        with using(self.read_engine, conn) as db:
            index = self._index(store_id, db)
            index.lock.acquire()
            try:
                index.refresh(db)
                # Only a read of our own connection, begun after `stamp` was read, vouches for it.
                index.refreshed_at = stamp
            except BaseException:
                index.lock.release()
                raise
        try:
            yield index
        finally:
            index.lock.release()

    def catch_up(self, store_id: str) -> None:
        """Bring this worker's index of the store current (reading SQL as `reading` does), so the
        next `CACHED_ONLY` read of it needs none."""
        with self.reading(store_id):
            pass

    def history(self, store_id: str, resource_type: str, resource_id: str) -> list[VersionRow]:
        """Every version of one resource, oldest first (the layer's seed version included)."""
        with self.read_engine.connect() as conn:
            index = self._index(store_id, conn)
            rows = version_rows(
                conn.execute(
                    select(*_VERSION_COLUMNS)
                    .where(
                        FhirVersion.store_id == store_id,
                        FhirVersion.resource_type == resource_type,
                        FhirVersion.resource_id == resource_id,
                    )
                    .order_by(FhirVersion.seq)
                )
            )
        base = index.layer.by_key.get((resource_type, resource_id)) if index.layer else None
        if base is not None:
            meta = base.get("meta", {})
            seed = VersionRow(
                0, resource_type, resource_id, str(meta.get("versionId", "1")),
                str(meta.get("lastUpdated", "")), False, json.dumps(base),
            )  # fmt: skip
            rows.insert(0, seed)
        return rows

    def store_history(
        self, store_id: str, resource_type: str | None, since: str | None, offset: int, limit: int
    ) -> tuple[int, list[VersionRow]]:
        """(total, one page) of the versions the store wrote, newest first (type or system history).

        `since` is an instant in the stored `lastUpdated` spelling (`…T03:04:05.678Z`), which sorts
        as text; seeded layer versions are not rows and are not listed.
        """
        where = [FhirVersion.store_id == store_id]
        if resource_type is not None:
            where.append(FhirVersion.resource_type == resource_type)
        if since is not None:
            where.append(FhirVersion.last_updated >= since)
        with self.read_engine.connect() as conn:
            if not self.exists(store_id, conn):
                raise FhirError(404, f"no FHIR store {store_id}")
            total = conn.execute(select(func.count()).select_from(FhirVersion).where(*where)).scalar() or 0
            rows = version_rows(
                conn.execute(
                    select(*_VERSION_COLUMNS)
                    .where(*where)
                    .order_by(FhirVersion.seq.desc())
                    .offset(offset)
                    .limit(limit)
                )
            )
        return int(total), rows

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def writing(self, store_id: str) -> Iterator[WriteTransaction]:
        """One atomic write: the store row is locked, and versions commit together or not at all.

        A playground's store goes through the write gate first (`sandboxes/gate.py`, by its
        `fhir` sandbox row, before the store row: the lifecycle's lock order): 409 once its task
        run takes no writes, nothing stored. A store with no sandbox row (`assay fhir-server`)
        has no task run to check."""
        now_dt = utcnow()
        with self.engine.begin() as conn:
            try:
                admit_surface(conn, store_id, "fhir")
            except SandboxClosed as closed:
                raise FhirError(409, closed.reason) from None
            # The row locked and its sequence read in one round trip: the index catches up to it.
            locked = conn.execute(
                update(FhirStoreRow)
                .where(FhirStoreRow.id == store_id)
                .values(locked_at=now_dt)
                .returning(FhirStoreRow.seq)
            ).first()
            if locked is None:
                raise FhirError(404, f"no FHIR store {store_id}")
            index = self._index(store_id, conn)
            with index.lock:
                index.refreshed_at = None  # refreshed inside a write transaction: vouches for nothing
                index.refresh(conn, upto=locked.seq)
            tx = WriteTransaction(index, conn, iso(now_dt) or "")
            yield tx
            if tx.rows:
                conn.execute(insert(FhirVersion), [{"store_id": store_id, **_row_dict(r)} for r in tx.rows])
                conn.execute(
                    update(FhirStoreRow).where(FhirStoreRow.id == store_id).values(seq=tx.rows[-1].seq)
                )
        if tx.rows:
            with index.lock:
                index.refreshed_at = None
                if index.seq == tx.base_seq:
                    index.apply(tx.rows, tx.rows[-1].seq)

    # -- captures ------------------------------------------------------------------------------

    def capture(self, store_id: str, conn: Connection | None = None) -> int:
        """The store's current sequence number: with the store id, a pointer to its final state.

        The store row is locked (`capture_read`, which `complete` runs with the other surfaces'
        reads in one statement).
        """
        with using(self.engine, conn) as db:
            seq = db.execute(capture_read(store_id)).scalar()
        if seq is None:
            raise FhirError(404, f"no FHIR store {store_id}")
        return int(seq)

    def seeded(self, store_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """The resources the store was seeded with (its dataset layer), before any agent write."""
        with using(self.engine, conn) as db:
            layer = self._index(store_id, db).layer
        return [] if layer is None else list(layer.by_key.values())

    def state_at(self, store_id: str, seq: int, conn: Connection | None = None) -> FhirStore:
        """A search index over the store as of sequence `seq` (a capture).

        The process's index is brought up to `seq` (never past it) without reading the store row:
        the caller knows the sequence, and `complete` has just read it in `capture`. An index
        already past `seq` (a write after the capture) is not used; the state is rebuilt.
        """
        with using(self.engine, conn) as db:
            index = self._index(store_id, db)
            with index.lock:
                if index.seq < seq:
                    index.refreshed_at = None  # brought up to a capture, not to now
                    index.refresh(db, upto=seq)
                if index.seq == seq:
                    return index.search_index
                layer = index.layer
        with using(self.engine, conn) as db:
            rows = version_rows(
                db.execute(
                    select(*_VERSION_COLUMNS)
                    .where(FhirVersion.store_id == store_id, FhirVersion.seq <= seq)
                    .order_by(FhirVersion.seq)
                )
            )
        pinned = StoreIndex(store_id, layer)
        pinned.apply(rows, seq)
        return pinned.search_index


def capture_read(store_id: str) -> Select[int]:
    """The store's sequence number, its row locked (PostgreSQL; SQLite's write lock is already
    held): a write in flight commits first and is captured, a later one finds it torn down."""
    return select(FhirStoreRow.seq).where(FhirStoreRow.id == store_id).with_for_update()


STRICT_KEY = "strict_validation"
"""The key in the playground's `fhir` sandbox row (its `credentials` JSON: settings the surface
needs, none of them secret) that says whether writes are validated, written by `provision`."""


def is_strict(sandbox_settings: Any, lenient: bool = False) -> bool:
    """Whether writes are validated (yes unless the playground's row says `false`, or,
    for a store without one, unless its server is `lenient`: `ASSAY_FHIR_LENIENT=1` on a
    standalone `assay fhir-server`)."""
    if isinstance(sandbox_settings, dict) and isinstance(sandbox_settings.get(STRICT_KEY), bool):
        return bool(sandbox_settings[STRICT_KEY])
    return not lenient


def _row_dict(row: VersionRow) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "resource_type": row.resource_type,
        "resource_id": row.resource_id,
        "version_id": row.version_id,
        "last_updated": row.last_updated,
        "deleted": row.deleted,
        "body": row.body,
    }


_BY_ENGINE: weakref.WeakKeyDictionary[Engine, EmbeddedFhir] = weakref.WeakKeyDictionary()
_BY_ENGINE_LOCK = threading.Lock()


def embedded_fhir(engine: Engine) -> EmbeddedFhir:
    """The one `EmbeddedFhir` of this process for `engine` (its indexes are per process)."""
    with _BY_ENGINE_LOCK:
        found = _BY_ENGINE.get(engine)
        if found is None:
            found = _BY_ENGINE[engine] = EmbeddedFhir(engine)
        return found
