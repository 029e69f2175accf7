"""Dataset layers: the FHIR resources an ordered list of `fhir` datasets loads (SPEC §5.1).

A layer is computed once per content (sha256 of the datasets' canonical JSON, in order), stored in
`fhir_layer_resources`, and shared read-only by every playground seeded with the same datasets.
Loading follows SPEC §5.1 through `assay.formats.fhir.resources_from_bundle`: `Bundle.type` and
entry requests ignored (DELETE entries skipped), ids kept, `urn:uuid` and absolute references
rewritten, unresolvable conditional references left verbatim, never a rejected bundle. Datasets load
in list order and the last write of a `(type, id)` wins. Seeded resources get `versionId` "1" and
`lastUpdated` = the layer's load time unless they carry their own.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, insert, select
from sqlalchemy.exc import IntegrityError

from assay.formats.fhir import FhirStore
from assay.sandboxes.fhir import _loading
from assay.sandboxes.fhir._db import using
from assay.sandboxes.fhir.tables import FhirLayer, FhirLayerResource
from assay.snapshot import is_file_name
from assay.store.ids import iso, utcnow

__all__ = ["MAX_KEY_LENGTH", "Layer", "LayerCache", "LayerNotLoadable", "layer_hash", "seeded_resources"]

Key = tuple[str, str]
_INSERT_CHUNK = 2000
MAX_LAYERS = 16
"""Layers one process keeps parsed; indexes that use an evicted layer keep their reference."""
MAX_KEY_LENGTH = 64
"""The longest resource type and id the store's key columns hold (FHIR ids are 1-64 characters)."""


class LayerNotLoadable(ValueError):
    """A dataset resource the store cannot hold; `start` fails the task run with this reason (409,
    SPEC §1.1) instead of PostgreSQL refusing the insert as "too long" (a 422 that left the task
    run `created`) while SQLite quietly kept it."""


def _check_keys(resources: Sequence[dict[str, Any]]) -> None:
    """Every type and id must fit the store's key columns and name one file of a snapshot
    (`fhir/<type>/<id>.json`, SPEC §6): `..` made the state tar.gz answer 500, `a/b` put the
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
                    "resource is the file fhir/<type>/<id>.json (SPEC §6)"
                )


def layer_hash(bundles: Sequence[Any]) -> str:
    """The content key of an ordered list of dataset bundles (stable across JSON round trips)."""
    digest = hashlib.sha256(b"fhir-layer/1\n")
    for bundle in bundles:
        digest.update(json.dumps(bundle, sort_keys=True, separators=(",", ":")).encode())
        digest.update(b"\n")
    return digest.hexdigest()


@dataclass
class Layer:
    """One loaded layer, read-only once built; `index` is shared until a playground writes."""

    hash: str
    by_key: dict[Key, dict[str, Any]]
    _index: FhirStore | None = None

    def index(self) -> FhirStore:
        if self._index is None:
            self._index = FhirStore(self.by_key.values())
        return self._index


def seeded_resources(bundles: Sequence[Any], loaded_at: str) -> list[dict[str, Any]]:
    """The resources `bundles` load, in order, last write wins, seed meta filled in (SPEC §5.1)."""
    by_key: dict[Key, dict[str, Any]] = {}
    for bundle in bundles:
        for resource in _loading.load_bundle(bundle, list(by_key.values())):
            meta = resource.get("meta")
            meta = dict(meta) if isinstance(meta, dict) else {}
            meta.setdefault("versionId", "1")
            meta.setdefault("lastUpdated", loaded_at)
            resource["meta"] = meta
            key = (resource["resourceType"], resource["id"])
            by_key.pop(key, None)
            by_key[key] = resource
    return list(by_key.values())


class LayerCache:
    """Layers by hash: built from datasets (and stored) once, read back from SQL by other workers."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._layers: OrderedDict[str, Layer] = OrderedDict()
        self._lock = threading.Lock()

    def ensure(self, bundles: Sequence[Any], conn: Connection | None = None) -> str:
        """Load `bundles` as a layer unless one with the same content exists; its hash.

        With `conn`, everything happens inside the caller's transaction (a savepoint guards the
        insert), so provisioning inside the service's `start` transaction never waits on itself.
        """
        key = layer_hash(bundles)
        with self._lock:
            cached = self._layers.get(key)
        with using(self.engine, conn) as db:
            # Existence is decided by SQL, never by the cache: a caller's transaction that
            # stored a layer may have rolled back since.
            if db.execute(select(FhirLayer.hash).where(FhirLayer.hash == key)).first() is not None:
                return key
            now = utcnow()
            resources = list(cached.by_key.values()) if cached else seeded_resources(bundles, iso(now) or "")
            _check_keys(resources)
            rows = [
                {
                    "layer_hash": key,
                    "resource_type": r["resourceType"],
                    "resource_id": r["id"],
                    "position": i,
                    "body": json.dumps(r, separators=(",", ":")),
                }
                for i, r in enumerate(resources)
            ]
            try:
                with db.begin_nested():
                    for start in range(0, len(rows), _INSERT_CHUNK):
                        db.execute(insert(FhirLayerResource), rows[start : start + _INSERT_CHUNK])
                    db.execute(
                        insert(FhirLayer), [{"hash": key, "resource_count": len(rows), "loaded_at": now}]
                    )
            except IntegrityError:
                return key  # another worker stored the same content first; its rows are identical
        with self._lock:
            self._remember(Layer(key, {(r["resourceType"], r["id"]): r for r in resources}))
        return key

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
        resources = [json.loads(body) for body in rows]
        layer = Layer(key, {(r["resourceType"], r["id"]): r for r in resources})
        with self._lock:
            return self._remember(layer)
