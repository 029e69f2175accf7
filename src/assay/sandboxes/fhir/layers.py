"""Dataset layers: the FHIR resources an ordered list of `fhir` datasets loads (docs/sandboxes.md).

A layer is computed once per content (a key over the datasets' content hashes, in order: each
dataset is hashed once, when it is stored), stored in `fhir_layer_resources`, and shared read-only
by every playground seeded with the same datasets; a start whose layer exists reads no dataset.
Loading follows docs/sandboxes.md through `assay.formats.fhir.BundleLoader` (one search index for all
conditional references, built at most once per layer, linear in the data): `Bundle.type` and
entry requests ignored (DELETE entries skipped), ids kept, `urn:uuid` and absolute references
rewritten, unresolvable conditional references left verbatim, never a rejected bundle. Datasets load
in list order and the last write of a `(type, id)` wins. Seeded resources get `versionId` "1" and
`lastUpdated` = the layer's load time unless they carry their own.
"""

from __future__ import annotations

import hashlib
import json
import queue
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Engine, insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from assay.core.memory import bulk_loading
from assay.formats.fhir import BundleLoader, FhirStore
from assay.sandboxes.fhir import _loading
from assay.sandboxes.fhir._db import using
from assay.sandboxes.fhir._layer_copy import copy_lines
from assay.sandboxes.fhir.tables import FhirLayer, FhirLayerResource
from assay.snapshot import is_file_name
from assay.store.database import read_only
from assay.store.ids import iso, utcnow
from assay.store.json_values import content_hash, json_bytes

__all__ = [
    "MAX_KEY_LENGTH",
    "Layer",
    "LayerCache",
    "LayerNotLoadable",
    "LayerSource",
    "insert_missing",
    "layer_hash",
    "layer_key",
    "load_layer",
    "seeded_resources",
]

Key = tuple[str, str]
_INSERT_CHUNK = 2000
MAX_LAYERS = 16
"""Layers one process keeps parsed; indexes that use an evicted layer keep their reference."""
MAX_KEY_LENGTH = 64
"""The longest resource type and id the store's key columns hold (FHIR ids are 1-64 characters)."""


class LayerNotLoadable(ValueError):
    """A dataset resource the store cannot hold; `start` fails the task run with this reason (409,
    docs/api.md) instead of PostgreSQL refusing the insert as "too long" (a 422 that left the task
    run `created`) while SQLite quietly kept it."""


def _check_keys(resources: Sequence[dict[str, Any]]) -> None:
    """Every type and id must fit the store's key columns and name one file of a snapshot
    (`fhir/<type>/<id>.json`, docs/snapshots.md): `..` made the state tar.gz answer 500, `a/b` put the
    resource in a folder `assay verify` does not read."""
    for resource in resources:
        for what in ("resourceType", "id"):
            value = str(resource[what])
            shown = value if len(value) <= 80 else value[:77] + "..."
            if len(value) > MAX_KEY_LENGTH:
                raise LayerNotLoadable(
                    f"a dataset resource's {what} is longer than {MAX_KEY_LENGTH} characters "
                    f"(FHIR ids are 1-{MAX_KEY_LENGTH}): {shown}"
                )
            if not is_file_name(value):
                raise LayerNotLoadable(
                    f"a dataset resource's {what} {shown!r} is not a file name, and a captured "
                    "resource is the file fhir/<type>/<id>.json (docs/snapshots.md)"
                )


def layer_key(content_hashes: Sequence[str]) -> str:
    """The content key of an ordered list of datasets, from each one's `content_hash` (hashed
    once, when the dataset was stored): a warm `start` decodes and serialises nothing to find
    its layer."""
    digest = hashlib.sha256(b"fhir-layer/2\n")
    for content in content_hashes:
        digest.update(content.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def layer_hash(bundles: Sequence[Any]) -> str:
    """`layer_key` of bundles that have no stored hash (a capture, a seeded standalone store)."""
    return layer_key([content_hash(bundle) for bundle in bundles])


@dataclass(frozen=True)
class LayerSource:
    """What a store is seeded with: the layer's key and how to get its datasets if it must be built."""

    key: str
    bundles: Callable[[], Iterable[Any]]
    """The datasets' contents, in load order; called only when the layer does not exist yet."""
    owned: bool = False
    """True when `bundles()` returns fresh data (just read and decoded) that loading may rewrite
    in place instead of copying first."""

    @classmethod
    def of(cls, bundles: Sequence[Any]) -> LayerSource:
        """Bundles at hand (a capture, a test), hashed here; copied when loaded."""
        return cls(layer_hash(bundles), lambda: bundles)


@dataclass
class Layer:
    """One loaded layer, read-only once built; `index` is shared until a playground writes."""

    hash: str
    by_key: dict[Key, dict[str, Any]]
    _index: FhirStore | None = None

    def index(self) -> FhirStore:
        if self._index is None:
            with bulk_loading():
                self._index = FhirStore(self.by_key.values())
        return self._index


def _stamp(loaded_at: str) -> Callable[[dict[str, Any]], None]:
    def stamp(resource: dict[str, Any]) -> None:
        meta = resource.get("meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        meta.setdefault("versionId", "1")
        meta.setdefault("lastUpdated", loaded_at)
        resource["meta"] = meta

    return stamp


def load_layer(bundles: Iterable[Any], loaded_at: str, *, copy: bool = True) -> BundleLoader:
    """`bundles` loaded in order, last write wins, seed meta filled in (docs/sandboxes.md); with
    `copy=False` the caller's bundles are rewritten in place (it owns them: freshly decoded)."""
    loader = BundleLoader(copy=copy, prepare=_stamp(loaded_at))
    with bulk_loading():
        for data in bundles:
            bundle = _loading.as_bundle(data)
            if bundle is not None:
                loader.add(bundle)
    return loader


def seeded_resources(bundles: Sequence[Any], loaded_at: str) -> list[dict[str, Any]]:
    """The resources `bundles` load, in order, last write wins, seed meta filled in (docs/sandboxes.md)."""
    return load_layer(bundles, loaded_at).resources()


def _row_chunks(layer: Layer) -> Iterator[list[dict[str, Any]]]:
    """`fhir_layer_resources` rows of `layer`, `_INSERT_CHUNK` at a time: only one chunk's JSON
    text is alive at once (all of a 1,024-patient layer's, ~450 MB, used to be built before the
    first insert and held until the last). Each row keeps its load-order `position`, but the rows
    come in primary-key order (type, id), so each chunk's index entries land on neighbouring
    B-tree pages: inserting a 1,024-patient layer in chunks into SQLite wrote ~700 MB of WAL in
    load order and ~340 MB in key order, in about half the CPU (2.4-2.8 s -> 1.4 s)."""
    resources = list(layer.by_key.values())
    order = sorted(range(len(resources)), key=list(layer.by_key).__getitem__)  # (type, id) keys
    for start in range(0, len(order), _INSERT_CHUNK):
        with bulk_loading():
            chunk = [
                {
                    "layer_hash": layer.hash,
                    "resource_type": resources[i]["resourceType"],
                    "resource_id": resources[i]["id"],
                    "position": i,
                    "body": json_bytes(resources[i]),  # text for the writer: `_body_text`
                }
                for i in order[start : start + _INSERT_CHUNK]
            ]
        yield chunk


def insert_missing(engine: Engine, table: type[Any]) -> Any:
    """INSERT that skips rows already there (SQLite and PostgreSQL); a plain INSERT elsewhere."""
    if engine.dialect.name == "sqlite":
        return sqlite_insert(table).on_conflict_do_nothing()
    if engine.dialect.name == "postgresql":
        return postgresql_insert(table).on_conflict_do_nothing()
    return insert(table)


@contextmanager
def _checkpointing_after_each(conn: Connection) -> Iterator[Callable[[], None]]:
    """On SQLite: `conn`'s own commits do not checkpoint the WAL (`wal_autocheckpoint` off), and
    the function yielded checkpoints what is there (PASSIVE: it waits for no reader or writer)
    with no lock held; the setting is put back after. Elsewhere the function does nothing.

    A commit that finds the WAL past 1,000 pages checkpoints it before returning, so on SQLite
    each chunk's commit copied and synced the chunk into the database file while its turn at the
    write lock was held; and whatever commit came first after a long build (another request's,
    or `start`'s own) copied all that the build left behind: 1.5-2.4 s at 1,024 patients with no
    other request answered."""
    if conn.dialect.name != "sqlite":
        yield lambda: None
        return
    raw = conn.connection.dbapi_connection
    assert raw is not None
    (pages,) = raw.execute("PRAGMA wal_autocheckpoint").fetchone()
    raw.execute("PRAGMA wal_autocheckpoint=0")
    try:
        yield lambda: raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        raw.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")


_ROW_COLUMNS = ("layer_hash", "resource_type", "resource_id", "position", "body")
_SQLITE_ROWS = 500


def _body_text(row: dict[str, Any]) -> dict[str, Any]:
    """A `_row_chunks` row with its `body` as the text the column holds."""
    return {**row, "body": row["body"].decode()}


def _values(row: dict[str, Any]) -> list[Any]:
    """A `_row_chunks` row's values in `_ROW_COLUMNS` order, `body` as text."""
    return [
        row["layer_hash"],
        row["resource_type"],
        row["resource_id"],
        row["position"],
        row["body"].decode(),
    ]


class _RowWriter:
    """Layer rows written on a thread of its own, a chunk per transaction, while the caller
    serialises the next chunk: the database's work (SQLite's B-tree inserts and checkpoints,
    PostgreSQL's backend) runs without the GIL, so on two cores it overlaps the encoding instead
    of following it.

    On SQLite each chunk is a transaction of its own, so it takes its turn at the write lock in
    line with the requests (`store/write_queue.py`), and is checkpointed right after, outside the lock
    (`_checkpointing_after_each`). At most `_QUEUED` chunks wait, so memory stays bounded; the
    first error stops the writing and is raised by `__exit__` (the chunks still queued are
    dropped, and the next build writes whatever is missing).
    """

    _QUEUED = 2

    def __init__(self, engine: Engine):
        self.engine = engine
        self.statement = insert_missing(engine, FhirLayerResource)
        self._queue: queue.Queue[list[dict[str, Any]] | None] = queue.Queue(self._QUEUED)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="assay-layer-writer", daemon=True)

    def __enter__(self) -> _RowWriter:
        self._thread.start()
        return self

    def put(self, chunk: list[dict[str, Any]]) -> None:
        if self._error is None:
            self._queue.put(chunk)

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None and error is None:
            raise self._error

    def _writer(self, conn: Connection) -> Callable[[list[dict[str, Any]]], None]:
        """How `conn` writes a chunk. SQLite: multi-row `VALUES` statements of `_SQLITE_ROWS` rows
        (fewer if SQLite allows fewer variables) through the driver, instead of `executemany`'s
        one `sqlite3_step` per row: each step releases the GIL and must take it back from the
        thread serialising the next chunk, which holds it up to the switch interval at a time
        (measured at CPython's 5 ms; `assay serve` now sets 0.5 ms, `service/priority.py`) (the whole start went from 11.7 to 13-19 s with the writer thread and
        `executemany`); SQLAlchemy's own multi-row `insert().values()` compiles each chunk anew,
        ten times the insert's cost. PostgreSQL: `_copier`."""
        if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
            return self._copier(conn)
        if conn.dialect.name != "sqlite":

            def write_many(chunk: list[dict[str, Any]]) -> None:
                conn.execute(self.statement, [_body_text(row) for row in chunk])

            return write_many
        raw = conn.connection.dbapi_connection
        assert raw is not None
        limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        rows = max(1, min(_SQLITE_ROWS, limit // len(_ROW_COLUMNS)))
        head = f"INSERT INTO {FhirLayerResource.__tablename__} ({', '.join(_ROW_COLUMNS)}) VALUES "
        one = "(" + ", ".join("?" * len(_ROW_COLUMNS)) + ")"
        statements: dict[int, str] = {}

        def write(chunk: list[dict[str, Any]]) -> None:
            for start in range(0, len(chunk), rows):
                part = chunk[start : start + rows]
                sql = statements.get(len(part))
                if sql is None:
                    sql = statements[len(part)] = (
                        head + ", ".join([one] * len(part)) + " ON CONFLICT DO NOTHING"
                    )
                conn.exec_driver_sql(sql, tuple([value for row in part for value in _values(row)]))

        return write

    def _copier(self, conn: Connection) -> Callable[[list[dict[str, Any]]], None]:
        """PostgreSQL (psycopg): each chunk by `COPY … FROM STDIN` in a savepoint, and when a row is
        already there (another worker building the same layer, or a build cut half-way) the
        savepoint is rolled back and the chunk goes by `executemany` of the INSERT that skips
        existing rows. The 64x rows: client CPU 1.7-2.0 s -> 0.4 s, wall 5.0-5.2 s -> 3.2-3.5 s
        (psycopg's pipelined `executemany` was the faster of the two INSERT forms there).

        The chunk goes as one COPY text-format payload built here (`_layer_copy.copy_lines`) rather than by
        psycopg's `write_row`, whose per-field Python formatting ran on this thread at ~0.8 s of
        GIL time per 1,024-patient build, taken from the thread serialising the next chunk."""
        import psycopg  # only with PostgreSQL

        raw = cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)
        copy = f"COPY {FhirLayerResource.__tablename__} ({', '.join(_ROW_COLUMNS)}) FROM STDIN"

        def write(chunk: list[dict[str, Any]]) -> None:
            # The chunk's commit need not wait for its WAL to reach the disk: the `fhir_layers`
            # row that makes the layer exist is committed after the last chunk, normally, and its
            # flush covers every earlier commit's WAL; a crash before it loses only rows of a layer
            # that does not exist yet, which the next build writes again. The chunks' flushes
            # (~5 MB each) kept the writer waiting 0.4-0.8 s of a 1,024-patient build.
            conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            try:
                with conn.begin_nested(), raw.cursor() as cursor, cursor.copy(copy) as rows:
                    rows.write(copy_lines(chunk))
            except psycopg.errors.UniqueViolation:
                conn.execute(self.statement, [_body_text(row) for row in chunk])

        return write

    def _run(self) -> None:
        try:
            with self.engine.connect() as conn, _checkpointing_after_each(conn) as checkpoint:
                write = self._writer(conn)
                while (chunk := self._queue.get()) is not None:
                    with conn.begin():
                        write(chunk)
                    checkpoint()
        except BaseException as error:  # raised in the caller's thread by __exit__
            self._error = error
            while self._queue.get() is not None:  # let the caller finish putting
                pass


class LayerCache:
    """Layers by hash: built from datasets (and stored) once, read back from SQL by other workers."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.read_engine = read_only(engine)
        self._layers: OrderedDict[str, Layer] = OrderedDict()
        self._building: dict[str, threading.Lock] = {}
        self._stored: set[str] = set()
        """Layers known to be committed (seen by a read outside any caller's transaction, or
        stored by `build`): layers are never deleted, so these need no SQL to be found again."""
        self._lock = threading.Lock()
        self.builds = 0
        """Layers this process built from datasets (a warm start builds none)."""

    def ensure(self, source: LayerSource, conn: Connection | None = None) -> str:
        """Load `source`'s datasets as layer `source.key` unless it exists; the key.

        The key is `layer_key` of the datasets' content hashes: when the layer exists (a warm
        start), `source.bundles` is never called, so nothing is read or decoded. With `conn`,
        everything happens inside the caller's transaction (a savepoint guards the insert), so
        provisioning inside the service's `start` transaction never waits on itself.
        """
        key = source.key
        with self._lock:
            if key in self._stored:
                return key
            cached = self._layers.get(key)
        with using(self.engine, conn) as db:
            # Existence is decided by SQL, never by the cache of built layers: a caller's
            # transaction that stored a layer may have rolled back since.
            if db.execute(select(FhirLayer.hash).where(FhirLayer.hash == key)).first() is not None:
                return key
            now = utcnow()
            layer = cached if cached is not None else self._load(source, now)
            try:
                with db.begin_nested():
                    for chunk in _row_chunks(layer):
                        db.execute(insert(FhirLayerResource), [_body_text(row) for row in chunk])
                    db.execute(
                        insert(FhirLayer),
                        [{"hash": key, "resource_count": len(layer.by_key), "loaded_at": now}],
                    )
            except IntegrityError:
                return key  # another worker stored the same content first; its rows are identical
        with self._lock:
            self._remember(layer)
        return key

    def build(self, source: LayerSource) -> None:
        """Build and store layer `source.key` ahead of the transaction that will use it, holding
        no lock while it decodes and loads: the rows go in short transactions of their own
        (`_INSERT_CHUNK` each, an existing row skipped) and the `fhir_layers` row last, so the
        layer exists only once it is whole. Content-addressed, so a layer whose `start` then
        fails is harmless, and a build killed half-way is completed by the next one.

        A `start` of 1,024 patients held the database write lock for the whole build (every
        other write, and on SQLite every request, waited or answered 503); `ensure` in the
        transaction now finds the layer and returns at once. The chunks are written by a thread
        of their own while the next is serialised (`_RowWriter`).
        """
        key = source.key
        with self._lock:
            if key in self._stored:
                return
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one build per layer in this process; the others wait, then find it
            with self.read_engine.connect() as conn:
                if conn.execute(select(FhirLayer.hash).where(FhirLayer.hash == key)).first() is not None:
                    with self._lock:
                        self._stored.add(key)
                        self._building.pop(key, None)
                    return
            with self._lock:
                cached = self._layers.get(key)
            now = utcnow()
            layer = cached if cached is not None else self._load(source, now)
            with _RowWriter(self.engine) as writer:
                for chunk in _row_chunks(layer):
                    writer.put(chunk)
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        insert(FhirLayer),
                        [{"hash": key, "resource_count": len(layer.by_key), "loaded_at": now}],
                    )
            except IntegrityError:
                pass  # another worker finished the same content first
            with self._lock:
                self._remember(layer)
                self._stored.add(key)
                self._building.pop(key, None)

    def _load(self, source: LayerSource, now: datetime) -> Layer:
        self.builds += 1
        loader = load_layer(source.bundles(), iso(now) or "", copy=not source.owned)
        layer = Layer(source.key, loader.by_key, loader.store)
        _check_keys(list(layer.by_key.values()))
        return layer

    def _remember(self, layer: Layer) -> Layer:
        """Cache `layer` (caller holds the lock); the least recently used beyond `MAX_LAYERS` go."""
        kept = self._layers.setdefault(layer.hash, layer)
        self._layers.move_to_end(layer.hash)
        while len(self._layers) > MAX_LAYERS:
            self._layers.popitem(last=False)
        return kept

    def get(self, key: str, conn: Connection) -> Layer:
        """The layer `key`, read from SQL (over the caller's connection) on first use here."""
        with self._lock:
            layer = self._layers.get(key)
        if layer is not None:
            return layer
        rows = conn.execute(
            select(FhirLayerResource.body)
            .where(FhirLayerResource.layer_hash == key)
            .order_by(FhirLayerResource.position)
        ).scalars()
        with bulk_loading():
            resources = [json.loads(body) for body in rows]
            layer = Layer(key, {(r["resourceType"], r["id"]): r for r in resources})
        with self._lock:
            return self._remember(layer)
