"""Where playground files live: one fsspec filesystem, one prefix per playground (docs/sandboxes.md).

The embedded default is a local folder, `<data dir>/files`. `ASSAY_STORAGE_URL` moves it to an
object store: `s3://bucket/prefix` (s3fs, `assay[s3]`) or `gs://bucket/prefix` (gcsfs,
`assay[gcs]`); `file:///path` names another local folder. Extra filesystem options (an S3
`endpoint_url`, a GCS `project`) come as a JSON object in `ASSAY_STORAGE_OPTIONS`; credentials
come the usual way for each store (AWS_* variables, Application Default Credentials).
`STORAGE_EMULATOR_HOST` (gcsfs's own setting) points `gs://` at a GCS emulator; Assay then uses
gcsfs's JSON-API filesystem, not its default one, which first asks GCS's gRPC Storage Control API
for each bucket's layout — an API emulators lack (a 60 s timeout per call, never cached).

`open_storage` checks the URL at start-up — the protocol, the package it needs, and a probe
object written, read back and deleted — and raises `StorageError` with a message naming the URL
and the cause, so a deployment never runs with its files silently going somewhere else. Listing
caches are off: the tree is read from the sidecar (`tree.py`), and every read sees the last write.

Writes never land half-done: content is set aside first (`aside`), under `.partial/` beside the
playground prefixes (local storage: the same filesystem, so the final move is a rename) or in a
local scratch folder then uploaded there (object stores: the final move is a server-side copy).
Set-aside content is never part of a tree (the sidecar is the tree), so it is never listed to an
agent nor captured; a writer that dies before it commits or discards leaves it behind, and
`sweep_partials` removes that: the SFTP listener's (under `sftp/`, named by playground) all at once
when the listener starts — only one runs per deployment, so any there belong to one that crashed —
and the others (API uploads, seeds, sidecar writes, each aside for milliseconds) once older than
`PARTIAL_GRACE_SECONDS`, read from the ULID in their name.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem
from ulid import ULID

if TYPE_CHECKING:
    from assay.sandboxes.files.tree import PlaygroundFiles

__all__ = [
    "PARTIAL_GRACE_SECONDS",
    "FileStorage",
    "Staged",
    "StorageError",
    "open_storage",
    "storage_settings",
]

log = logging.getLogger("assay.files")

_PACKAGES = {"s3": ("s3fs", "s3"), "gs": ("gcsfs", "gcs")}
_ALIASES = {"s3a": "s3", "gcs": "gs", "local": "file"}
_CHUNK = 1024 * 1024
_PARTIAL = ".partial"
_LISTENER = "sftp"
"""The SFTP listener's set-aside area, inside `.partial/` (and the scratch folder)."""

PARTIAL_GRACE_SECONDS = 600.0
"""How old set-aside content of a writer other than the SFTP listener must be before a sweep
takes it for abandoned: those writers hold it for one request, far below this."""


class StorageError(RuntimeError):
    """The configured storage cannot be used; the message names the URL and the cause."""


@dataclass(frozen=True, slots=True)
class Staged:
    """Content set aside in the storage, ready to be moved into a playground's tree."""

    key: str
    size: int
    sha256: str


class FileStorage:
    """The storage root: hands out per-playground views and aside locations."""

    def __init__(self, url: str, fs: Any, root: str, scratch: Path):
        self.url = url
        """As configured (the local default as an absolute `file://` URL); kept in capture pointers."""
        self.fs = fs
        self.root = root.rstrip("/")
        self.scratch = scratch
        self.is_local = isinstance(fs, LocalFileSystem)

    def key(self, *parts: str) -> str:
        return "/".join([self.root, *(part for part in parts if part)])

    def playground(self, prefix: str) -> PlaygroundFiles:
        from assay.sandboxes.files.tree import PlaygroundFiles

        return PlaygroundFiles(self, prefix)

    def aside(self, owner: str = "", *, listener: bool = False) -> Path:
        """A fresh local path to write content to before it is staged, named `<owner>.<ULID>`
        (`owner`: the playground, for whoever finds it abandoned). `listener`: the SFTP
        listener's, which `sweep_partials(listener_gone=True)` removes whatever its age."""
        name = f"{owner}.{ULID()}" if owner else str(ULID())
        folder = self._local_partials()
        if listener:
            folder = folder / _LISTENER
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name

    def _local_partials(self) -> Path:
        return Path(self.key(_PARTIAL)) if self.is_local else self.scratch

    def stage(self, local: Path) -> Staged:
        """Hash the content at `local` and make it a staged object of this storage; `local` is gone
        afterwards (moved or uploaded). Raises OSError when the store refuses it."""
        digest = hashlib.sha256()
        size = 0
        with local.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
        if self.is_local:
            return Staged(str(local), size, digest.hexdigest())
        key = self.key(_PARTIAL, *local.relative_to(self.scratch).parts)
        try:
            self.fs.put_file(str(local), key)
        finally:
            local.unlink(missing_ok=True)
        return Staged(key, size, digest.hexdigest())

    def stage_bytes(self, data: bytes) -> Staged:
        if not self.is_local:
            key = self.key(_PARTIAL, str(ULID()))
            self.fs.pipe_file(key, data)
            return Staged(key, len(data), hashlib.sha256(data).hexdigest())
        local = self.aside()
        try:
            local.write_bytes(data)
        except BaseException:  # a full disk: the part written would hold its space until a sweep
            local.unlink(missing_ok=True)
            raise
        return Staged(str(local), len(data), hashlib.sha256(data).hexdigest())

    def discard(self, staged: Staged | Path | None) -> None:
        """Remove set-aside content that will not be committed; never raises."""
        try:
            if isinstance(staged, Path):
                staged.unlink(missing_ok=True)
            elif staged is not None:
                self.fs.rm_file(staged.key)
        except (OSError, FileNotFoundError):
            pass

    def sweep_partials(self, *, listener_gone: bool = False, older_than: float | None = None) -> list[str]:
        """Remove abandoned set-aside content; the paths and keys removed. Never raises (a store
        that refuses is logged: a sweep must not stop a start-up).

        `listener_gone`: everything the SFTP listener set aside (call it as the listener starts).
        `older_than`: everything else set aside more than that many seconds ago."""
        cutoff = None if older_than is None else time.time() - older_than

        def abandoned(relative: tuple[str, ...]) -> bool:
            if listener_gone and len(relative) > 1 and relative[0] == _LISTENER:
                return True
            born = _born(relative[-1])
            return cutoff is not None and (born is None or born < cutoff)

        removed: list[str] = []
        area = self._local_partials()
        try:
            found = [path for path in area.rglob("*") if path.is_file()] if area.is_dir() else []
            for path in found:
                if abandoned(path.relative_to(area).parts):
                    path.unlink(missing_ok=True)
                    removed.append(str(path))
        except OSError as exc:
            log.warning("could not sweep set-aside uploads in %s: %s", area, exc)
        if self.is_local:
            return removed
        root = self.key(_PARTIAL)
        try:
            keys = [str(key) for key in self.fs.find(root)]
            for key in keys:
                if key.startswith(root + "/") and abandoned(tuple(key[len(root) + 1 :].split("/"))):
                    self.fs.rm_file(key)
                    removed.append(key)
        except (OSError, FileNotFoundError) as exc:
            log.warning("could not sweep set-aside uploads under %s/%s: %s", self.url, _PARTIAL, exc)
        return removed

    def move(self, source: str, target: str) -> None:
        """Move one object within the storage: a rename on local disk, copy + delete elsewhere.

        Copy + delete on every object store (it is what s3fs's `mv` does): gcsfs's `mv` tries GCS's
        newer `moveTo` first, which emulators answer 501, and retries it for ~30 s before falling
        back. That the copy is not atomic does not matter: a path is in the tree only once the
        sidecar names it, which is written after the move."""
        if self.is_local:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        else:
            self.fs.copy(source, target)
            self.fs.rm_file(source)

    def write_json(self, key: str, value: Any) -> None:
        """Replace a small JSON object whole (a rename locally, a single PUT on object stores)."""
        data = json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8")
        if not self.is_local:
            self.fs.pipe_file(key, data)
            return
        local = self.aside()
        try:
            local.write_bytes(data)
            self.move(str(local), key)
        except BaseException:  # a full disk: no half-written copy left behind in the scratch space
            local.unlink(missing_ok=True)
            raise

    def read_json(self, key: str) -> Any:
        try:
            return json.loads(self.fs.cat_file(key))
        except FileNotFoundError:
            return None

    def probe(self) -> None:
        """Write, read back and delete one object under the root; `StorageError` when any fails."""
        key = self.key(f".assay-probe-{ULID()}")
        try:
            if self.is_local:
                Path(self.root).mkdir(parents=True, exist_ok=True)
            self.fs.pipe_file(key, b"assay")
            if self.fs.cat_file(key) != b"assay":
                raise StorageError(f"storage {self.url} returned other bytes than were written")
            self.fs.rm_file(key)
        except StorageError:
            raise
        except Exception as exc:
            raise StorageError(f"storage {self.url} is not usable: {type(exc).__name__}: {exc}") from None


def _born(name: str) -> float | None:
    """When content set aside as `name` (`[<owner>.]<ULID>`) was, in epoch seconds; None if the
    name is not one of ours."""
    try:
        return float(ULID.from_str(name.rpartition(".")[2]).timestamp)
    except ValueError:
        return None


def storage_settings(
    environ: dict[str, str] | os._Environ[str] | None = None,
) -> tuple[str | None, dict[str, Any]]:
    """(`ASSAY_STORAGE_URL` or None, `ASSAY_STORAGE_OPTIONS` as a dict); `StorageError` for options
    that are not a JSON object."""
    env = os.environ if environ is None else environ
    url = env.get("ASSAY_STORAGE_URL") or None
    raw = env.get("ASSAY_STORAGE_OPTIONS") or ""
    if not raw:
        return url, {}
    try:
        options = json.loads(raw)
    except ValueError as exc:
        raise StorageError(f"ASSAY_STORAGE_OPTIONS is not JSON: {exc}") from None
    if not isinstance(options, dict):
        raise StorageError("ASSAY_STORAGE_OPTIONS must be a JSON object")
    return url, options


def open_storage(url: str | None, data_dir: Path, options: dict[str, Any] | None = None) -> FileStorage:
    """The storage at `url` (None: `<data_dir>/files`), checked by a probe; `StorageError` else."""
    scratch = data_dir.resolve() / "tmp" / "files"
    if not url:
        root = data_dir.resolve() / "files"
        storage = FileStorage(root.as_uri(), LocalFileSystem(), str(root), scratch)
        storage.probe()
        return storage
    protocol, _, rest = url.partition("://")
    protocol = _ALIASES.get(protocol.lower(), protocol.lower())
    if not rest or protocol not in ("file", "s3", "gs"):
        raise StorageError(
            f"ASSAY_STORAGE_URL must be s3://bucket/prefix, gs://bucket/prefix or file:///path, got {url!r}"
        )
    if protocol == "file":
        root = Path(rest).resolve()
        storage = FileStorage(root.as_uri(), LocalFileSystem(), str(root), scratch)
        storage.probe()
        return storage
    if not rest.split("/", 1)[0]:
        raise StorageError(f"ASSAY_STORAGE_URL {url!r} names no bucket")
    package, extra = _PACKAGES[protocol]
    try:
        cls = fsspec.get_filesystem_class(protocol)
        if protocol == "gs" and os.environ.get("STORAGE_EMULATOR_HOST"):
            cls = importlib.import_module("gcsfs.core").GCSFileSystem
    except (ImportError, ValueError):
        raise StorageError(
            f"ASSAY_STORAGE_URL {url!r} needs the {package} package, which is not installed "
            f"(install assay[{extra}])"
        ) from None
    try:
        fs = cls(use_listings_cache=False, skip_instance_cache=True, **(options or {}))
    except Exception as exc:
        raise StorageError(f"storage {url} cannot be opened: {type(exc).__name__}: {exc}") from None
    storage = FileStorage(f"{protocol}://{rest.rstrip('/')}", fs, rest, scratch)
    storage.probe()
    return storage
