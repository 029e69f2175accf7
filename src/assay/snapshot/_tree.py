"""Read-only views of a snapshot tree: a directory on disk or the members of a tar.gz.

A tar.gz is read into memory member by member and never extracted, so a hostile archive (absolute
paths, `..`, links, devices) cannot write anywhere; such members are refused by name.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from assay.core.errors import SnapshotError
from assay.snapshot._ustar import Unusual, read_members

__all__ = ["DirTree", "MemoryTree", "Tree", "memory_tree", "open_tree", "tree_members"]

MAX_ARCHIVE_BYTES = 2 * 1024**3


class Tree:
    """Files under a root, addressed by relative POSIX paths."""

    def walk(self, prefix: str) -> Iterator[str]:
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def mtime(self, path: str) -> datetime | None:
        raise NotImplementedError


class DirTree(Tree):
    def __init__(self, root: Path):
        self.root = root

    def walk(self, prefix: str) -> Iterator[str]:
        base = self.root / prefix
        if not base.is_dir():
            return
        for path in sorted(base.rglob("*")):
            if path.is_file() and not path.is_symlink():
                yield path.relative_to(self.root).as_posix()

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def exists(self, path: str) -> bool:
        return (self.root / path).is_file()

    def mtime(self, path: str) -> datetime | None:
        return datetime.fromtimestamp((self.root / path).stat().st_mtime, UTC)


class MemoryTree(Tree):
    def __init__(self, members: dict[str, tuple[bytes, datetime | None]]):
        self.members = members

    def walk(self, prefix: str) -> Iterator[str]:
        start = prefix.rstrip("/") + "/" if prefix else ""
        yield from sorted(p for p in self.members if p.startswith(start))

    def read(self, path: str) -> bytes:
        return self.members[path][0]

    def exists(self, path: str) -> bool:
        return path in self.members

    def mtime(self, path: str) -> datetime | None:
        return self.members[path][1]


def open_tree(path: Path) -> Tree:
    """A snapshot directory, a directory holding `snapshot/`, or a tar.gz whose top is `snapshot/`."""
    if not path.exists():
        raise SnapshotError(f"snapshot not found: {path}")
    if path.is_dir():
        inner = path / "snapshot"
        return DirTree(inner if inner.is_dir() else path)
    try:
        return _read_archive(path)
    except (tarfile.TarError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SnapshotError(
            f"{path} is neither a snapshot directory nor a readable tar.gz ({reason})"
        ) from None


def _read_archive(path: Path) -> MemoryTree:
    """The archive's regular members by path. Assay's own archives are read by `_ustar` (
    `tarfile` cost several microseconds a member); anything that reader does not read exactly like
    `tarfile` does is read again, from the start, by `tarfile`."""
    try:
        with path.open("rb") as handle:
            members = _read_fast(handle)
    except Unusual:
        members = _read_with_tarfile(path)
    return MemoryTree(_unwrapped(members))


def _read_fast(handle: BinaryIO) -> dict[str, tuple[bytes, datetime | None]]:
    total = 0

    def accept(name: str, size: int) -> str:
        nonlocal total
        key = _member_key(name)
        total += size
        if total > MAX_ARCHIVE_BYTES:
            raise SnapshotError("snapshot archive is larger than 2 GiB unpacked")
        return key

    return read_members(handle, accept, _utc)


def _utc(mtime: float) -> datetime | None:
    return datetime.fromtimestamp(mtime, UTC)


def _read_with_tarfile(path: Path) -> dict[str, tuple[bytes, datetime | None]]:
    members: dict[str, tuple[bytes, datetime | None]] = {}
    total = 0
    with tarfile.open(path, mode="r:*") as archive:
        for member in archive:
            if member.isdir():
                continue
            key = _member_key(member.name)
            if not member.isfile():
                raise SnapshotError(f"snapshot archive member is not a regular file: {member.name!r}")
            total += member.size
            if total > MAX_ARCHIVE_BYTES:
                raise SnapshotError("snapshot archive is larger than 2 GiB unpacked")
            handle = archive.extractfile(member)
            data = handle.read() if handle else b""
            members[key] = (data, datetime.fromtimestamp(member.mtime, UTC))
    return members


def _member_key(name: str) -> str:
    """The member's path as a key; `SnapshotError` for an absolute path or a `..` segment.

    A name with no empty, `.` or `..` segment (nor a leading `/`) is its own key; the test below
    sends a few more to `PurePosixPath` (`.hidden`), which gives them the same key."""
    if name and name[0] not in "/." and name[-1] != "/" and "//" not in name and "/." not in name:
        return name
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise SnapshotError(f"unsafe path in snapshot archive: {name!r}")
    return path.as_posix().removeprefix("./")


def _unwrapped(members: dict[str, tuple[bytes, datetime | None]]) -> dict[str, tuple[bytes, datetime | None]]:
    """The members below a single top folder `snapshot/` (how `archive_snapshot` packs them)."""
    roots = {p.split("/", 1)[0] for p in members}
    if roots == {"snapshot"}:
        return {p.split("/", 1)[1]: v for p, v in members.items() if "/" in p}
    return members


def memory_tree(files: Mapping[str, bytes]) -> MemoryTree:
    """A tree of the given files by relative path (a reference snapshot sent as JSON); an absolute
    path, a `..` or empty segment, a backslash or NUL is refused by name, like an archive's."""
    members: dict[str, tuple[bytes, datetime | None]] = {}
    for name, data in files.items():
        parts = name.split("/")
        if (
            name.startswith("/")
            or any(part in ("", ".", "..") for part in parts)
            or "\\" in name
            or "\x00" in name
        ):
            raise SnapshotError(f"unsafe path in snapshot: {name!r}")
        members[name] = (data, None)
    return MemoryTree(_unwrapped(members))


def tree_members(path: Path) -> dict[str, bytes]:
    """Every file of a snapshot directory or tar.gz by relative path (what a package pushes)."""
    tree = open_tree(path)
    return {name: tree.read(name) for name in tree.walk("")}
