"""`SnapshotState`: the snapshot layout as a `SandboxState`.

Layout (docs/snapshots.md)::

    manifest.json  fhir/<Type>/<id>.json  hl7/outbound/<seq>.hl7 [+ .json]
    portal/<resource>.json | portal/<slug>/<resource>.json  files/<path...>  files.meta.json
    voice/turns.json  x12/<seq>.response.x12 [+ .request.x12, .meta.json]

A missing sub-folder is an empty store. A file that cannot be read (bad JSON, a FHIR file without
`resourceType`) is skipped and listed in `warnings`, never fatal: one broken record must not hide
the rest of the state from the judge. FHIR resources are indexed once, at open.
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from assay.core.errors import SnapshotError
from assay.core.json_decode import loads
from assay.core.memory import bulk_loading
from assay.core.state import (
    FileRecord,
    Hl7Record,
    PortalRow,
    SearchParams,
    VoiceTurn,
    X12Record,
    hl7_digests,
    portal_digests,
    resource_digest,
    x12_digests,
)
from assay.formats.fhir import FhirStore
from assay.snapshot._tree import Tree, memory_tree, open_tree, tree_members

__all__ = ["SnapshotState", "guess_content_type", "open_snapshot", "open_snapshot_files", "snapshot_files"]

_EXTRA_TYPES = {
    ".hl7": "x-application/hl7-v2+er7",
    ".x12": "application/edi-x12",
    ".edi": "application/edi-x12",
}


def open_snapshot(path: str | Path) -> SnapshotState:
    """Open a snapshot directory, a directory holding `snapshot/`, or its tar.gz.

    The archive's members and one JSON file per resource are read with the garbage collector off
    and frozen after (`bulk_loading`): at 137k resources its passes took 8.5 of 20 s."""
    with bulk_loading():
        return SnapshotState(open_tree(Path(path)))


def open_snapshot_files(files: Mapping[str, bytes]) -> SnapshotState:
    """A snapshot given as its files by relative path (a task's reference snapshot);
    `SnapshotError` names an unsafe path."""
    with bulk_loading():
        return SnapshotState(memory_tree(files))


def snapshot_files(path: str | Path) -> dict[str, bytes]:
    """Every file of a snapshot directory or tar.gz by path relative to the snapshot's root: what
    `open_snapshot_files` reads back (a benchmark package's reference snapshot is sent this way)."""
    return tree_members(Path(path))


class SnapshotState:
    """A read-only `SandboxState` over one snapshot tree."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.warnings: list[str] = []
        self.manifest: dict[str, Any] = self._read_manifest()
        self.fhir = FhirStore(self._read_fhir())

    # -- SandboxState ------------------------------------------------------------------------

    def input_entity(self) -> Mapping[str, Any] | None:
        entity = self.manifest.get("input_entity")
        return entity if isinstance(entity, dict) else None

    def entity(self, entity_id: str) -> Mapping[str, Any] | None:
        entities = self.manifest.get("entities")
        found = entities.get(entity_id) if isinstance(entities, dict) else None
        return found if isinstance(found, dict) else None

    def fhir_search(self, resource_type: str, params: SearchParams) -> list[dict[str, Any]]:
        return self.fhir.search(resource_type, params)

    def hl7_outbound(self) -> Sequence[Hl7Record]:
        return self._hl7

    def portal_rows(self, resource: str, portal: str | None = None) -> Sequence[PortalRow]:
        return [
            row
            for row in self._portal
            if row.resource == resource and (portal is None or row.portal == portal)
        ]

    def files(self) -> Sequence[FileRecord]:
        return self._files

    def read_file(self, path: str) -> bytes:
        return self.tree.read("files/" + path.lstrip("/"))

    def voice_turns(self) -> Sequence[VoiceTurn]:
        return self._voice

    def x12_records(self) -> Sequence[X12Record]:
        return self._x12

    # -- BaselineState -------------------------------------------------------------------------

    def baseline(self, surface: str) -> Mapping[str, str] | None:
        """`baseline.json`'s digests for `surface`: what the playground was seeded with."""
        found = self._baseline.get(surface)
        return found if isinstance(found, dict) else None

    def digests(self, surface: str) -> Mapping[str, str]:
        """Digest by key of `surface`'s final state: the layout's own rule for a built-in surface,
        else each file under `<surface>/` by its path there (a new surface's snapshot folder)."""
        rule = _DIGESTS.get(surface)
        if rule is not None:
            return rule(self)
        return {
            path.removeprefix(surface + "/"): hashlib.sha256(self.tree.read(path)).hexdigest()
            for path in self.tree.walk(surface)
        }

    @cached_property
    def _baseline(self) -> dict[str, Any]:
        if not self.tree.exists("baseline.json"):
            return {}
        data = self._json("baseline.json")
        if not isinstance(data, dict):
            self.warnings.append("baseline.json: must be a JSON object of surfaces")
            return {}
        return data

    # -- loading -------------------------------------------------------------------------------

    def _json(self, path: str) -> Any:
        try:
            return loads(self.tree.read(path))
        except RecursionError:
            self.warnings.append(f"{path}: JSON nested too deeply to read")
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            self.warnings.append(f"{path}: not valid JSON ({exc})")
            return None

    def _read_manifest(self) -> dict[str, Any]:
        if not self.tree.exists("manifest.json"):
            return {}
        manifest = self._json("manifest.json")
        if manifest is not None and not isinstance(manifest, dict):
            raise SnapshotError("manifest.json must be a JSON object")
        return manifest or {}

    def _read_fhir(self) -> list[dict[str, Any]]:
        resources = []
        for path in self.tree.walk("fhir"):
            if not path.endswith(".json"):
                continue
            resource = self._json(path)
            if resource is None:
                continue
            parts = path.split("/")
            if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
                self.warnings.append(f"{path}: not a FHIR resource (no resourceType)")
                continue
            if len(parts) == 3 and resource["resourceType"] != parts[1]:
                self.warnings.append(
                    f"{path}: resourceType {resource['resourceType']} in the {parts[1]} folder"
                )
            resource.setdefault("id", parts[-1].removesuffix(".json"))
            if not isinstance(resource["id"], str):
                self.warnings.append(f"{path}: id is not a string")
                continue
            resources.append(resource)
        return resources

    @cached_property
    def _hl7(self) -> list[Hl7Record]:
        records = []
        for path in self.tree.walk("hl7/outbound"):
            if not path.endswith(".hl7"):
                continue
            stem = path.removesuffix(".hl7")
            meta = self._json(stem + ".json") if self.tree.exists(stem + ".json") else None
            meta = meta if isinstance(meta, dict) else {}
            message = _text(self.tree.read(path))
            records.append(Hl7Record(_seq(stem), message, meta.get("event_id"), meta.get("received_at")))
        return sorted(records, key=lambda r: r.seq)

    @cached_property
    def _x12(self) -> list[X12Record]:
        records = []
        for path in self.tree.walk("x12"):
            if not path.endswith(".response.x12"):
                continue
            stem = path.removesuffix(".response.x12")
            request = stem + ".request.x12"
            meta = self._json(stem + ".meta.json") if self.tree.exists(stem + ".meta.json") else None
            meta = meta if isinstance(meta, dict) else {}
            records.append(
                X12Record(
                    seq=_seq(stem),
                    response=_text(self.tree.read(path)),
                    request=_text(self.tree.read(request)) if self.tree.exists(request) else None,
                    record_id=meta.get("record_id"),
                    received_at=meta.get("received_at"),
                )
            )
        return sorted(records, key=lambda r: r.seq)

    @cached_property
    def _portal(self) -> list[PortalRow]:
        rows: list[PortalRow] = []
        # Rows of the default portal first, then each slug's; within a file, insertion order.
        for path in sorted(self.tree.walk("portal"), key=lambda p: (p.count("/"), p)):
            parts = path.split("/")
            if not path.endswith(".json") or len(parts) not in (2, 3):
                continue
            data = self._json(path)
            if data is None:
                continue
            if not isinstance(data, list):
                self.warnings.append(f"{path}: a portal resource must be a JSON array of rows")
                continue
            slug = parts[1] if len(parts) == 3 else None
            resource = parts[-1].removesuffix(".json")
            rows.extend(PortalRow(i, resource, row, slug) for i, row in enumerate(data))
        return rows

    @cached_property
    def _files(self) -> list[FileRecord]:
        meta: dict[str, Any] = {}
        if self.tree.exists("files.meta.json"):
            loaded = self._json("files.meta.json")
            meta = loaded if isinstance(loaded, dict) else {}
        records = []
        for full in self.tree.walk("files"):
            path = full.removeprefix("files/")
            info = meta.get(path) or meta.get("/" + path) or {}
            if not isinstance(info, dict):
                info = {}
            mtime = self.tree.mtime(full)
            size = self._sidecar(path, info, "size", int)
            sha256 = self._sidecar(path, info, "sha256", str)
            if size is None or size < 0 or not sha256:
                # Read only when the sidecar does not already give both (docs/snapshots.md).
                data = self.tree.read(full)
                size = size if size is not None and size >= 0 else len(data)
                sha256 = sha256 or hashlib.sha256(data).hexdigest()
            records.append(
                FileRecord(
                    path=path,
                    size=size,
                    sha256=sha256,
                    content_type=self._sidecar(path, info, "content_type", str) or guess_content_type(path),
                    uploaded_at=self._sidecar(path, info, "uploaded_at", str)
                    or (mtime.isoformat(timespec="milliseconds").replace("+00:00", "Z") if mtime else None),
                    seeded=self._sidecar(path, info, "seeded", bool) or False,
                    metadata=self._sidecar(path, info, "metadata", dict) or {},
                )
            )
        return sorted(records, key=lambda r: (_instant(r.uploaded_at), r.path))

    def _sidecar(self, path: str, info: Mapping[str, Any], key: str, kind: type) -> Any:
        """`info[key]` when it has the layout's type (docs/snapshots.md); else None, and a warning unless
        null.

        The computed value stands in, so one bad entry never makes the check that reads it fail.
        """
        value = info.get(key)
        if value is None or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
            return value
        self.warnings.append(f"files.meta.json: {key} of {path} is not a {kind.__name__}, ignored")
        return None

    @cached_property
    def _voice(self) -> list[VoiceTurn]:
        if not self.tree.exists("voice/turns.json"):
            return []
        data = self._json("voice/turns.json")
        turns = []
        for i, turn in enumerate(data if isinstance(data, list) else []):
            if not isinstance(turn, dict):
                turn = {}
            text = turn.get("text")
            if not isinstance(text, str):
                # Kept as an empty turn: `turn` in evidence indexes the whole transcript (docs/assertions.md).
                self.warnings.append(f"voice/turns.json: turn {i} has no text")
                text = ""
            source, call_id, kind = turn.get("source"), turn.get("call_id"), turn.get("kind")
            turns.append(
                VoiceTurn(
                    str(turn.get("speaker") or ""),
                    text,
                    turn.get("start_ms"),
                    turn.get("end_ms"),
                    source if isinstance(source, str) else None,
                    call_id if isinstance(call_id, str) else None,
                    kind if isinstance(kind, str) else "speech",
                )
            )
        return turns


def _fhir_digests(state: SnapshotState) -> dict[str, str]:
    return {
        f"{kind}/{resource['id']}": resource_digest(resource)
        for kind in state.fhir.types()
        for resource in state.fhir.resources(kind)
    }


_DIGESTS: dict[str, Callable[[SnapshotState], Mapping[str, str]]] = {
    "fhir": _fhir_digests,
    "files": lambda state: {record.path: record.sha256 for record in state._files},
    "hl7": lambda state: hl7_digests(state._hl7),
    "portal": lambda state: portal_digests(state._portal),
    "x12": lambda state: x12_digests(state._x12),
    "voice": lambda state: {},
}
"""The surfaces whose snapshot layout has its own change keys; voice records no change."""

_NO_INSTANT = datetime.min.replace(tzinfo=UTC)


def _instant(stamp: str | None) -> datetime:
    """`uploaded_at` as an instant for recency order (docs/snapshots.md): text order would put
    `10:00:00.5Z` before `10:00:00Z` and ignore offsets. No offset means UTC; a missing or
    unreadable stamp sorts first."""
    try:
        moment = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        moment = None
    if moment is None:
        return _NO_INSTANT
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _seq(stem: str) -> int:
    name = stem.rsplit("/", 1)[-1]
    return int(name) if name.isdigit() else 0


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def guess_content_type(path: str) -> str:
    """The content type of a file by its extension, for files whose sidecar names none (docs/snapshots.md);
    HL7 and X12 files get their own types, anything unknown `application/octet-stream`."""
    suffix = Path(path).suffix.lower()
    if suffix in _EXTRA_TYPES:
        return _EXTRA_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"
