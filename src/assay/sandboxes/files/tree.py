"""One playground's file tree: content objects plus the snapshot sidecar, read and changed together.

Layout under the storage root (the same names as a snapshot, so capture is a copy)::

    <playground>/files/<path...>      the content, byte for byte
    <playground>/files.meta.json      {path: {size, content_type, sha256, uploaded_at, seeded, metadata}}
    <playground>/files.dirs.json      [folder, ...]  folders made by mkdir (object stores have none)
    <playground>/files.baseline.json  {path: sha256}  what `start` seeded (`no-unexpected-changes`)

The sidecar is the tree: listings, `stat` and the `sftp-file-present` check read it (one object,
whatever the backend), never a directory listing of the store. A folder exists when it was made
by mkdir or holds a file. Every method that changes the tree expects its caller to hold the
playground's gate (`access.py`), which serializes writers and keeps them out once the task run has
ended; the order inside each write keeps the sidecar true to the content if the store fails half
way: content is moved in before its entry is written, an entry is removed before its content —
except on a full disk, where the entry's removal needs the room its content frees (`delete`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from assay.core.state import FileRecord
from assay.sandboxes.files.errors import (
    AlreadyExists,
    FileMissing,
    FolderNotEmpty,
    IsAFolder,
    NotAFolder,
    Unsupported,
)
from assay.sandboxes.files.paths import parent_of
from assay.snapshot import guess_content_type
from assay.store import iso, utcnow
from assay.store.faults import no_space

if TYPE_CHECKING:
    from assay.sandboxes.files.storage import FileStorage, Staged

__all__ = ["Listing", "PlaygroundFiles", "record_of"]


@dataclass(frozen=True, slots=True)
class Listing:
    """The tree at one moment: sidecar entries by path, and every folder (the root is `""`)."""

    files: Mapping[str, Mapping[str, Any]]
    folders: frozenset[str]

    def kind(self, path: str) -> str | None:
        """`"file"`, `"folder"` or None."""
        if path in self.files:
            return "file"
        return "folder" if path in self.folders else None

    def children(self, folder: str) -> list[tuple[str, str]]:
        """(name, kind) of what `folder` holds directly, sorted by name."""
        prefix = f"{folder}/" if folder else ""
        names: dict[str, str] = {}
        for path in self.files:
            if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                names[path[len(prefix) :]] = "file"
        for path in self.folders:
            if path and path.startswith(prefix) and "/" not in path[len(prefix) :]:
                names[path[len(prefix) :]] = "folder"
        return sorted(names.items())


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def record_of(path: str, entry: Mapping[str, Any]) -> FileRecord:
    """A sidecar entry as the `FileRecord` checks read (docs/assertions.md)."""
    metadata = entry.get("metadata")
    return FileRecord(
        path=path,
        size=int(entry.get("size") or 0),
        sha256=str(entry.get("sha256") or ""),
        content_type=str(entry.get("content_type") or guess_content_type(path)),
        uploaded_at=entry.get("uploaded_at"),
        seeded=bool(entry.get("seeded")),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


class PlaygroundFiles:
    """The file tree of one playground (`prefix` is its id)."""

    def __init__(self, storage: FileStorage, prefix: str):
        self.storage = storage
        self.prefix = prefix
        self._meta_key = storage.key(prefix, "files.meta.json")
        self._dirs_key = storage.key(prefix, "files.dirs.json")
        self._baseline_key = storage.key(prefix, "files.baseline.json")

    def object_key(self, path: str) -> str:
        return self.storage.key(self.prefix, "files", path)

    # -- reading ---------------------------------------------------------------------------------

    def sidecar(self) -> dict[str, dict[str, Any]]:
        loaded = self.storage.read_json(self._meta_key)
        if not isinstance(loaded, dict):
            return {}
        return {path: entry for path, entry in loaded.items() if isinstance(entry, dict)}

    def listing(self) -> Listing:
        files = self.sidecar()
        made = self.storage.read_json(self._dirs_key)
        folders = {""} | {path for path in made or () if isinstance(path, str)}
        for path in [*files, *folders]:
            folders.update(_ancestors(path))
        return Listing(files, frozenset(folders))

    def records(self) -> list[FileRecord]:
        """Every file, in recency order (docs/snapshots.md: `uploaded_at`, then path)."""
        records = [record_of(path, entry) for path, entry in self.sidecar().items()]
        return sorted(records, key=lambda record: (record.uploaded_at or "", record.path))

    def baseline(self) -> dict[str, str] | None:
        """Digest by path of what `start` seeded; None for a tree seeded before it was recorded."""
        loaded = self.storage.read_json(self._baseline_key)
        if not isinstance(loaded, dict):
            return None
        return {str(path): str(digest) for path, digest in loaded.items()}

    def read(self, path: str) -> bytes:
        if path not in self.sidecar():
            raise FileMissing(f"no file at {path}")
        return bytes(self.storage.fs.cat_file(self.object_key(path)))

    def open(self, path: str) -> IO[bytes]:
        """A binary reader over the file's content; the caller closes it."""
        return self.storage.fs.open(self.object_key(path), "rb")  # type: ignore[no-any-return]

    # -- writing (the caller holds the gate) -----------------------------------------------------

    def check_writable(self, listing: Listing, path: str, *, make_folders: bool) -> None:
        """Refuse a file at `path` where a folder is, under a file, or (unless `make_folders`, as
        SFTP does not) in a folder that does not exist."""
        if not path or listing.kind(path) == "folder":
            raise IsAFolder(f"{path or '/'} is a folder")
        for ancestor in _ancestors(path):
            if ancestor in listing.files:
                raise NotAFolder(f"{ancestor} is a file, not a folder")
        if not make_folders and parent_of(path) not in listing.folders:
            raise FileMissing(f"no folder {parent_of(path)} to hold {path}")

    def commit(
        self,
        staged: Staged,
        path: str,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        seeded: bool = False,
        make_folders: bool = True,
    ) -> FileRecord:
        """Move staged content to `path` (replacing any file there) and write its entry."""
        listing = self.listing()
        self.check_writable(listing, path, make_folders=make_folders)
        entry = {
            "size": staged.size,
            "content_type": content_type or guess_content_type(path),
            "sha256": staged.sha256,
            "uploaded_at": iso(utcnow()),
            "seeded": seeded,
            "metadata": dict(metadata or {}),
        }
        self.storage.move(staged.key, self.object_key(path))
        self._write_sidecar({**listing.files, path: entry})
        return record_of(path, entry)

    def delete(self, path: str) -> FileRecord:
        listing = self.listing()
        if listing.kind(path) == "folder":
            raise IsAFolder(f"{path or '/'} is a folder (remove folders with rmdir)")
        entry = listing.files.get(path)
        if entry is None:
            raise FileMissing(f"no file at {path}")
        remaining = {p: e for p, e in listing.files.items() if p != path}
        try:
            self._write_sidecar(remaining)
        except OSError as exc:
            if not no_space(exc):
                raise
            # A full disk: the sidecar's new copy needs room, and the file's space is what frees
            # it. A delete must always free space, so the file goes first here (should the sidecar
            # still not fit, it names a file that is gone: read as missing, deleted again).
            self._remove_object(path)
            self._write_sidecar(remaining)
            return record_of(path, entry)
        self._remove_object(path)
        return record_of(path, entry)

    def _remove_object(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # gone already: a delete cut short by a full disk
            self.storage.fs.rm_file(self.object_key(path))

    def rename(self, old: str, new: str, *, overwrite: bool = False) -> list[tuple[str, str]]:
        """Move a file or a folder with everything in it; the (old, new) path of each file moved.

        A moved file counts as the agent's (docs/assertions.md: "renamed through the sandbox surfaces"):
        `seeded` false, `uploaded_at` now, its type guessed again when it was only guessed.
        """
        listing = self.listing()
        kind = listing.kind(old)
        if kind is None or not old:
            raise FileMissing(f"no file or folder at {old or '/'}")
        if new == old:
            return []
        if new.startswith(old + "/"):
            raise Unsupported(f"cannot move {old} into itself ({new})")
        target = listing.kind(new)
        if target == "folder" or (target == "file" and (kind == "folder" or not overwrite)):
            raise AlreadyExists(f"{new} already exists")
        if target is None:
            self.check_writable(listing, new, make_folders=False)
        moves = (
            [(old, new)]
            if kind == "file"
            else [(p, new + p[len(old) :]) for p in listing.files if p.startswith(old + "/")]
        )
        now = iso(utcnow())
        files = {p: e for p, e in listing.files.items() if p not in dict(moves)}
        for source, destination in moves:
            self.storage.move(self.object_key(source), self.object_key(destination))
            entry = dict(listing.files[source])
            if entry.get("content_type") == guess_content_type(source):
                entry["content_type"] = guess_content_type(destination)
            files[destination] = {**entry, "uploaded_at": now, "seeded": False}
        self._write_sidecar(files)
        if kind == "folder":
            made = self._made_folders()
            moved = {new + p[len(old) :] if p == old or p.startswith(old + "/") else p for p in made}
            self._write_folders(moved | {new})
        return moves

    def mkdir(self, path: str) -> None:
        listing = self.listing()
        if listing.kind(path) is not None:
            raise AlreadyExists(f"{path or '/'} already exists")
        self.check_writable(listing, path, make_folders=False)
        self._write_folders(self._made_folders() | {path})

    def rmdir(self, path: str) -> None:
        listing = self.listing()
        kind = listing.kind(path)
        if kind is None:
            raise FileMissing(f"no folder at {path}")
        if kind == "file":
            raise NotAFolder(f"{path} is a file (remove files with remove)")
        if not path:
            raise FolderNotEmpty("the root folder cannot be removed")
        if listing.children(path):
            raise FolderNotEmpty(f"folder {path} is not empty")
        self._write_folders(self._made_folders() - {path})

    def seed(self, path: str, data: bytes) -> FileRecord:
        """Write a dataset's or scenario's file (`seeded: true`), folders made as needed."""
        return self.commit(self.storage.stage_bytes(data), path, seeded=True)

    def record_baseline(self) -> None:
        """Remember the tree as seeded (`no-unexpected-changes`): called once the datasets are in,
        and again after each scenario step that drops a file, while only `start` has written."""
        digests = {path: str(entry.get("sha256") or "") for path, entry in self.sidecar().items()}
        self.storage.write_json(self._baseline_key, digests)

    def _made_folders(self) -> set[str]:
        made = self.storage.read_json(self._dirs_key)
        return {path for path in made or () if isinstance(path, str)}

    def _write_folders(self, folders: set[str]) -> None:
        self.storage.write_json(self._dirs_key, sorted(folders))

    def _write_sidecar(self, files: Mapping[str, Mapping[str, Any]]) -> None:
        self.storage.write_json(self._meta_key, dict(files))
