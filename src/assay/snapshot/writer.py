"""Writing the snapshot layout: from records to a directory, and a directory to tar.gz."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from assay.core.errors import SnapshotError
from assay.core.state import Hl7Record, PortalRow, VoiceTurn, X12Record

__all__ = ["SnapshotFile", "SnapshotWriter", "archive_snapshot", "is_file_name", "write_snapshot"]


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A file of the SFTP tree with the sidecar metadata `files.meta.json` keeps."""

    path: str
    content: bytes
    uploaded_at: str | None = None
    seeded: bool = False
    content_type: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _safe(relative: str) -> str:
    """A relative POSIX path that stays inside its folder; anything else is refused."""
    path = PurePosixPath(relative.lstrip("/"))
    if not path.parts or ".." in path.parts or "\x00" in relative:
        raise SnapshotError(f"unsafe path in snapshot: {relative!r}")
    return path.as_posix()


_NOT_FILE_NAMES = frozenset({"", ".", ".."})


def is_file_name(value: object) -> bool:
    """Whether `value` can be one file or folder name of the snapshot layout (a FHIR type or id, a
    portal slug or resource): a string, not empty, `.` or `..`, holding no `/`, `\\` or NUL.

    A snapshot stores one resource per `fhir/<type>/<id>.json`; an id `a/b` would be written as a
    nested file the reader lists under another id or skips. The service applies the same rule
    where ids enter (FHIR writes 422, dataset loading 409), so what it stores can be written here.
    """
    return (
        isinstance(value, str)
        and value not in _NOT_FILE_NAMES
        and not any(char in value for char in ("/", "\\", "\x00"))
    )


def _name(value: Any, what: str) -> str:
    """`value` as one file or folder name of the layout; `SnapshotError` when it is none, which
    keeps every writer other than the service (scripts, the SDK) honest too."""
    if not is_file_name(value):
        raise SnapshotError(f"unsafe {what} in snapshot: {value!r} is not a file name")
    return str(value)


class SnapshotWriter:
    """Writes one snapshot directory; each `add_*` appends to its store in recency order."""

    def __init__(self, root: Path, manifest: Mapping[str, Any] | None = None):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._write("manifest.json", _dumps({"format": 1, **(manifest or {})}))
        self._hl7_seq = 0
        self._x12_seq = 0
        self._files_meta: dict[str, Any] = {}
        self._portal: dict[tuple[str | None, str], list[Any]] = {}
        self._voice: list[dict[str, Any]] = []
        self._baseline: dict[str, dict[str, str]] = {}

    def _write(self, relative: str, data: bytes) -> None:
        target = self.root / _safe(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def add_fhir(self, resources: Iterable[Mapping[str, Any]]) -> None:
        for resource in resources:
            kind = _name(resource.get("resourceType"), "FHIR resourceType")
            rid = _name(resource.get("id"), "FHIR id")
            self._write(f"fhir/{kind}/{rid}.json", _dumps(resource))

    def add_baseline(self, surface: str, digests: Mapping[str, str]) -> None:
        """What `surface` was seeded with, digest by key, into `baseline.json` (written at close)."""
        self._baseline[_name(surface, "baseline surface")] = dict(sorted(digests.items()))

    def add_surface_file(self, surface: str, relative: str, data: bytes) -> None:
        """`<surface>/<relative>`: a surface whose layout is its own folder of files (its change
        keys are those relative paths, `SnapshotState.digests`)."""
        self._write(f"{_name(surface, 'surface')}/{_safe(relative)}", data)

    def add_hl7(self, record: Hl7Record | str) -> None:
        self._hl7_seq += 1
        stem = f"hl7/outbound/{self._hl7_seq:06d}"
        message = record if isinstance(record, str) else record.message
        self._write(stem + ".hl7", message.encode("utf-8"))
        if isinstance(record, Hl7Record) and (record.event_id or record.received_at):
            self._write(
                stem + ".json", _dumps({"event_id": record.event_id, "received_at": record.received_at})
            )

    def add_x12(self, record: X12Record) -> None:
        self._x12_seq += 1
        stem = f"x12/{self._x12_seq:06d}"
        self._write(stem + ".response.x12", record.response.encode("utf-8"))
        if record.request is not None:
            self._write(stem + ".request.x12", record.request.encode("utf-8"))
        if record.record_id or record.received_at:
            self._write(
                stem + ".meta.json",
                _dumps({"record_id": record.record_id, "received_at": record.received_at}),
            )

    def add_portal_row(self, row: PortalRow) -> None:
        self._portal.setdefault((row.portal, row.resource), []).append(row.row)

    def add_file(self, file: SnapshotFile) -> None:
        path = _safe(file.path)
        self._write("files/" + path, file.content)
        meta: dict[str, Any] = {
            "size": len(file.content),
            "sha256": hashlib.sha256(file.content).hexdigest(),
            "seeded": file.seeded,
        }
        if file.uploaded_at:
            meta["uploaded_at"] = file.uploaded_at
        if file.content_type:
            meta["content_type"] = file.content_type
        if file.metadata:
            meta["metadata"] = dict(file.metadata)
        self._files_meta[path] = meta

    def add_voice_turn(self, turn: VoiceTurn) -> None:
        entry: dict[str, Any] = {"speaker": turn.speaker, "text": turn.text}
        if turn.start_ms is not None:
            entry["start_ms"] = turn.start_ms
        if turn.end_ms is not None:
            entry["end_ms"] = turn.end_ms
        if turn.source is not None:
            entry["source"] = turn.source
        if turn.call_id is not None:
            entry["call_id"] = turn.call_id
        if turn.kind != "speech":
            entry["kind"] = turn.kind
        self._voice.append(entry)

    def close(self) -> Path:
        for (slug, resource), rows in self._portal.items():
            folder = f"portal/{_name(slug, 'portal slug')}/" if slug else "portal/"
            self._write(f"{folder}{_name(resource, 'portal resource')}.json", _dumps(rows))
        if self._files_meta:
            self._write("files.meta.json", _dumps(self._files_meta))
        if self._voice:
            self._write("voice/turns.json", _dumps(self._voice))
        if self._baseline:
            self._write("baseline.json", _dumps(self._baseline))
        return self.root


def write_snapshot(
    root: Path,
    *,
    manifest: Mapping[str, Any] | None = None,
    fhir: Iterable[Mapping[str, Any]] = (),
    hl7: Iterable[Hl7Record | str] = (),
    x12: Iterable[X12Record] = (),
    portal: Iterable[PortalRow] = (),
    files: Iterable[SnapshotFile] = (),
    voice: Iterable[VoiceTurn] = (),
) -> Path:
    """Write a whole snapshot directory at once."""
    writer = SnapshotWriter(root, manifest)
    writer.add_fhir(fhir)
    for message in hl7:
        writer.add_hl7(message)
    for record in x12:
        writer.add_x12(record)
    for row in portal:
        writer.add_portal_row(row)
    for file in files:
        writer.add_file(file)
    for turn in voice:
        writer.add_voice_turn(turn)
    return writer.close()


def archive_snapshot(root: Path) -> bytes:
    """The snapshot directory as a tar.gz whose single top-level directory is `snapshot/`.

    Only `files/` members keep their sub-second mtime (the reader's `uploaded_at` when the sidecar
    has none); every other member gets whole seconds. `tarfile` can only write a fractional mtime
    as a PAX record, a second 512-byte header per member that reading parses in Python: at 137k
    FHIR resources that was half of `assay verify`'s archive time."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                relative = path.relative_to(root).as_posix()
                archive.add(
                    path,
                    arcname="snapshot/" + relative,
                    recursive=False,
                    filter=None if relative.startswith("files/") else _whole_seconds,
                )
    return buffer.getvalue()


def _whole_seconds(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.mtime = int(member.mtime)
    return member


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8")
