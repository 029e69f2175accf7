"""One SFTP session of the files surface: the asyncssh `SFTPServer` that maps each SFTP request onto
the playground's tree (`tree.py`) through its gate (`access.py`), answering a refusal with the
SFTP status a client understands (see `sftp.py` for what is refused and why)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import stat as stat_mode
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import asyncssh
from asyncssh import SFTPAttrs, SFTPName

from assay.sandboxes.files.access import FileEvent, FilesAccess
from assay.sandboxes.files.errors import (
    AlreadyExists,
    BadPath,
    FileMissing,
    FilesError,
    FolderNotEmpty,
    IsAFolder,
    NotAFolder,
    SurfaceClosed,
    TooLarge,
    Unsupported,
)
from assay.sandboxes.files.paths import clean_path
from assay.sandboxes.files.storage import Staged
from assay.sandboxes.files.tree import Listing
from assay.store.faults import no_space, outage

__all__ = ["SftpSession"]

log = logging.getLogger("assay.sftp")


_FILE_MODE = stat_mode.S_IFREG | 0o644


_FOLDER_MODE = stat_mode.S_IFDIR | 0o755


def _status(exc: FilesError) -> asyncssh.SFTPError:
    """The SFTP status for a refused operation (SFTP v3 clients see v6 codes as FAILURE)."""
    kinds: list[tuple[type[FilesError], Callable[[str], asyncssh.SFTPError]]] = [
        (BadPath, asyncssh.SFTPPermissionDenied),
        (FileMissing, asyncssh.SFTPNoSuchFile),
        (NotAFolder, asyncssh.SFTPNotADirectory),
        (IsAFolder, asyncssh.SFTPFileIsADirectory),
        (AlreadyExists, asyncssh.SFTPFileAlreadyExists),
        (FolderNotEmpty, asyncssh.SFTPDirNotEmpty),
        (Unsupported, asyncssh.SFTPPermissionDenied),
    ]
    for kind, error in kinds:
        if isinstance(exc, kind):
            return error(str(exc))
    return asyncssh.SFTPFailure(str(exc))


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    try:
        yield
    except FilesError as exc:
        raise _status(exc) from None
    except Exception as exc:  # a dependency's fault is a status the client can retry on, not a crash
        if no_space(exc):
            log.warning("SFTP operation refused, no space left: %s", exc)
            raise asyncssh.SFTPNoSpaceOnFilesystem("no space left on the server: retry later") from None
        dependency = outage(exc)
        if dependency is None:
            raise
        log.warning("SFTP operation refused, the %s is unavailable: %s", dependency, exc)
        raise asyncssh.SFTPFailure(f"the {dependency} is unavailable: temporary failure, retry") from None


@dataclass(eq=False)
class _Handle:
    path: str
    writing: bool
    reader: IO[bytes] | None = None
    aside: Path | None = None
    writer: IO[bytes] | None = None
    size: int = 0
    append: bool = False
    refused: str | None = None
    moved: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class SftpSession(asyncssh.SFTPServer):
    """One SFTP session: the tree of the task run its login belongs to, as `/`."""

    def __init__(self, chan: asyncssh.SSHServerChannel):
        super().__init__(chan)
        self.access: FilesAccess = chan.get_connection().get_extra_info("assay_access")
        self.files = self.access.files

    # -- helpers -------------------------------------------------------------------------------

    def _path(self, raw: bytes) -> str:
        with _refusals():
            return clean_path(raw)

    async def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run a storage call in a thread, its refusals as SFTP statuses."""
        with _refusals():
            return await asyncio.to_thread(function, *args)

    async def _listing(self) -> Listing:
        return await self._call(self.files.listing)  # type: ignore[no-any-return]

    async def _open_for_traffic(self) -> None:
        if not await asyncio.to_thread(self.access.alive):
            raise _status(SurfaceClosed("the task run has ended: its files take no traffic"))

    def _gated(self, function: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        def run() -> Any:
            with self.access.gate():
                return function(*args)

        return run

    def _record(self, event: FileEvent) -> None:
        try:
            self.access.record(event)
        except Exception:  # the log must never fail the operation it describes
            log.exception("could not record %s of %s", event.type, event.path)

    async def _change(
        self, kind: str, path: str, request: dict[str, Any], function: Callable[..., Any], *args: Any
    ) -> Any:
        """A gated change to the tree, recorded as an event whether it worked or not."""
        try:
            result = await self._call(self._gated(function, *args))
        except asyncssh.SFTPError as exc:
            await asyncio.to_thread(self._record, FileEvent(kind, "SFTP", path, exc.code, request))
            raise
        await asyncio.to_thread(self._record, FileEvent(kind, "SFTP", path, 0, request))
        return result

    @staticmethod
    def _attrs(listing: Listing, path: str) -> SFTPAttrs:
        kind = listing.kind(path)
        if kind is None:
            raise asyncssh.SFTPNoSuchFile(f"no file or folder at /{path}")
        if kind == "folder":
            return SFTPAttrs(permissions=_FOLDER_MODE, size=0, uid=0, gid=0)
        entry = listing.files[path]
        moment = _epoch(entry.get("uploaded_at"))
        return SFTPAttrs(
            permissions=_FILE_MODE, size=int(entry.get("size") or 0), uid=0, gid=0, atime=moment, mtime=moment
        )

    # -- paths and attributes ------------------------------------------------------------------

    def realpath(self, path: bytes) -> bytes:
        return ("/" + self._path(path)).encode("utf-8")

    async def stat(self, path: bytes) -> SFTPAttrs:
        clean = self._path(path)
        return self._attrs(await self._listing(), clean)

    lstat = stat

    async def fstat(self, file_obj: object) -> SFTPAttrs:
        handle = _handle(file_obj)
        if handle.writing:
            return SFTPAttrs(permissions=_FILE_MODE, size=handle.size, uid=0, gid=0)
        return self._attrs(await self._listing(), handle.path)

    def setstat(self, path: bytes, attrs: SFTPAttrs) -> None:
        """Accepted and ignored: the tree keeps no modes or times of its own (`put -p` works)."""
        self._path(path)

    lsetstat = setstat

    def fsetstat(self, file_obj: object, attrs: SFTPAttrs) -> None:
        handle = _handle(file_obj)
        if handle.writing and attrs.size is not None and handle.writer is not None:
            handle.writer.truncate(attrs.size)
            handle.size = attrs.size

    async def scandir(self, path: bytes) -> AsyncIterator[SFTPName]:
        folder = self._path(path)
        listing = await self._listing()
        if listing.kind(folder) != "folder":
            raise (
                _status(NotAFolder(f"/{folder} is not a folder"))
                if folder in listing.files
                else (asyncssh.SFTPNoSuchFile(f"no folder at /{folder}"))
            )
        for name in (".", ".."):
            yield SFTPName(name.encode(), attrs=SFTPAttrs(permissions=_FOLDER_MODE, uid=0, gid=0))
        for name, _ in listing.children(folder):
            child = f"{folder}/{name}" if folder else name
            yield SFTPName(name.encode("utf-8"), attrs=self._attrs(listing, child))

    # -- files ---------------------------------------------------------------------------------

    async def open(self, path: bytes, pflags: int, attrs: SFTPAttrs) -> _Handle:
        clean = self._path(path)
        await self._open_for_traffic()
        listing = await self._listing()
        if not pflags & asyncssh.FXF_WRITE:
            kind = listing.kind(clean)
            if kind != "file":
                raise _status(
                    IsAFolder(f"/{clean} is a folder") if kind else FileMissing(f"no file at /{clean}")
                )
            reader = await self._call(self.files.open, clean)
            return _Handle(clean, writing=False, reader=reader)
        with _refusals():
            self.files.check_writable(listing, clean, make_folders=False)
            exists = clean in listing.files
            if exists and pflags & asyncssh.FXF_EXCL:
                raise AlreadyExists(f"/{clean} already exists")
            if not exists and not pflags & asyncssh.FXF_CREAT:
                raise FileMissing(f"no file at /{clean}")
        aside = self.files.storage.aside(self.files.prefix, listener=True)
        writer = aside.open("w+b")
        handle = _Handle(clean, writing=True, aside=aside, writer=writer)
        handle.append = bool(pflags & asyncssh.FXF_APPEND)
        if exists and not pflags & asyncssh.FXF_TRUNC:
            # An in-place edit starts from the current content, still aside.
            data = await self._call(self.files.read, clean)
            writer.write(data)
            handle.size = len(data)
        return handle

    async def read(self, file_obj: object, offset: int, size: int) -> bytes:
        handle = _handle(file_obj)
        source = handle.writer if handle.writing else handle.reader
        assert source is not None
        data = await asyncio.to_thread(_read_at, source, offset, size)
        handle.moved += len(data)
        return data

    def write(self, file_obj: object, offset: int, data: bytes) -> int:
        handle = _handle(file_obj)
        if not handle.writing or handle.writer is None:
            raise asyncssh.SFTPPermissionDenied("the file was opened for reading")
        if handle.refused is not None:
            raise asyncssh.SFTPFailure(handle.refused)
        if handle.append:
            offset = handle.size
        end = offset + len(data)
        limit = self.access.max_file_bytes
        if end > limit:
            handle.refused = f"/{handle.path} would be larger than the {limit}-byte limit for one file"
            raise _status(TooLarge(handle.refused))
        handle.writer.seek(offset)
        handle.writer.write(data)
        handle.size = max(handle.size, end)
        return len(data)

    async def close(self, file_obj: object) -> None:
        handle = _handle(file_obj)
        if not handle.writing:
            assert handle.reader is not None
            await asyncio.to_thread(handle.reader.close)
            request = {"path": handle.path, "bytes": handle.moved}
            await asyncio.to_thread(self._record, FileEvent("file_download", "SFTP", handle.path, 0, request))
            return
        assert handle.writer is not None and handle.aside is not None
        storage = self.files.storage
        try:
            handle.writer.close()  # flushes what is still buffered: on a full disk, this write fails
        except OSError as exc:
            storage.discard(handle.aside)  # the set-aside upload never outlives its failure
            if handle.refused is None:
                handle.refused = f"/{handle.path} could not be written: {exc.strerror or exc}"
            if no_space(exc):
                raise asyncssh.SFTPNoSpaceOnFilesystem("no space left on the server: retry later") from None
        if self.channel.is_closing() or handle.refused is not None:
            # The connection went away before the client closed the file (asyncssh closes open
            # handles on its way out), or a write was refused: nothing of it reaches the tree.
            storage.discard(handle.aside)
            if handle.refused is not None:
                request = {"path": handle.path, "size": handle.size, "refused": handle.refused}
                code = asyncssh.FX_FAILURE
                await asyncio.to_thread(
                    self._record, FileEvent("file_upload", "SFTP", handle.path, code, request)
                )
                raise asyncssh.SFTPFailure(handle.refused)
            return
        await self._commit(handle)

    async def _commit(self, handle: _Handle) -> None:
        assert handle.aside is not None
        storage = self.files.storage
        staged: Staged | None = None
        try:
            staged = await self._call(storage.stage, handle.aside)
            assert staged is not None
            request = {"path": handle.path, "size": staged.size, "sha256": staged.sha256}
            await self._change("file_upload", handle.path, request, self.files.commit, staged, handle.path)
            staged = None
        except OSError as exc:
            log.warning("upload of %s for %s failed: %s", handle.path, self.access.label, exc)
            raise asyncssh.SFTPFailure(f"the upload of /{handle.path} could not be stored") from None
        finally:
            storage.discard(handle.aside)
            storage.discard(staged)

    async def remove(self, path: bytes) -> None:
        clean = self._path(path)
        await self._change("file_delete", clean, {"path": clean}, self.files.delete, clean)

    async def rename(self, oldpath: bytes, newpath: bytes) -> None:
        await self._rename(oldpath, newpath, overwrite=False)

    async def posix_rename(self, oldpath: bytes, newpath: bytes) -> None:
        await self._rename(oldpath, newpath, overwrite=True)

    async def _rename(self, oldpath: bytes, newpath: bytes, *, overwrite: bool) -> None:
        old, new = self._path(oldpath), self._path(newpath)
        rename = self.files.rename
        request = {"path": old, "to": new}
        await self._change("file_rename", old, request, lambda: rename(old, new, overwrite=overwrite))

    async def mkdir(self, path: bytes, attrs: SFTPAttrs) -> None:
        clean = self._path(path)
        await self._call(self._gated(self.files.mkdir, clean))

    async def rmdir(self, path: bytes) -> None:
        clean = self._path(path)
        await self._call(self._gated(self.files.rmdir, clean))

    # -- refused outright ----------------------------------------------------------------------

    def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPPermissionDenied("symbolic links are not allowed here")

    def link(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPPermissionDenied("hard links are not allowed here")

    def readlink(self, path: bytes) -> bytes:
        raise asyncssh.SFTPNoSuchFile("there are no links here")

    def statvfs(self, path: bytes) -> Any:
        raise asyncssh.SFTPOpUnsupported("statvfs is not supported")

    def fstatvfs(self, file_obj: object) -> Any:
        raise asyncssh.SFTPOpUnsupported("statvfs is not supported")


def _handle(file_obj: object) -> _Handle:
    assert isinstance(file_obj, _Handle)
    return file_obj


def _read_at(source: IO[bytes], offset: int, size: int) -> bytes:
    source.seek(offset)
    return source.read(size)


def _epoch(stamp: Any) -> int | None:
    try:
        return int(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None
