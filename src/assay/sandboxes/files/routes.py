"""The files API of a started task run (docs/sandboxes.md): `files` (list), `files/{path}` (GET, PUT, DELETE).

- `GET files` lists every file, recursively, oldest first (docs/snapshots.md recency order), each with
  `path, size, content_type, sha256, uploaded_at, seeded` (and `metadata` when it has some);
  `?prefix=inbox/` keeps the paths under a folder. `GET files/{folder}` is the same list for a folder.
- `GET files/{path}` returns the bytes with the stored `Content-Type`, `ETag: "<sha256>"` and
  `Content-Length`.
- `PUT files/{path}` stores the body as the file (201 new, 200 replaced) and answers its entry.
  The type is the request's `Content-Type`, else guessed from the extension; headers
  `X-Assay-Meta-<name>: <value>` become custom metadata that `sftp-file-present` `key` fields read.
  Folders are made as needed (as in an object store). Over the per-file limit: 413.
- `DELETE files/{path}` → 204.

Paths are refused as the SFTP server refuses them (`paths.clean_path`): 400 naming the reason.
Every call goes through the same `FilesAccess` as the SFTP server and writes the same events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.files.access import FileEvent, FilesAccess
from assay.sandboxes.files.errors import BadPath, FileMissing, FilesError, TooLarge
from assay.sandboxes.files.paths import clean_path
from assay.sandboxes.files.tree import Listing, record_of
from assay.sandboxes.openapi import json_answer, listed
from assay.store.errors import (
    BadRequest,
    Conflict,
    DomainError,
    InsufficientStorage,
    NotFound,
    PayloadTooLarge,
)
from assay.store.faults import no_space

__all__ = ["files_router"]

_META_HEADER = "x-assay-meta-"


def _domain(exc: FilesError) -> DomainError:
    """The API error (docs/api.md) for a refused file operation."""
    if isinstance(exc, BadPath):
        return BadRequest(str(exc))
    if isinstance(exc, FileMissing):
        return NotFound(str(exc))
    if isinstance(exc, TooLarge):
        return PayloadTooLarge(str(exc))
    return Conflict(str(exc))


async def _run(function: Callable[..., Any], *args: Any) -> Any:
    try:
        return await run_in_threadpool(function, *args)
    except FilesError as exc:
        raise _domain(exc) from None


def _entry(path: str, stored: Any) -> dict[str, Any]:
    record = record_of(path, stored)
    entry: dict[str, Any] = {
        "path": record.path,
        "size": record.size,
        "content_type": record.content_type,
        "sha256": record.sha256,
        "uploaded_at": record.uploaded_at,
        "seeded": record.seeded,
    }
    if record.metadata:
        entry["metadata"] = dict(record.metadata)
    return entry


def _listed(listing: Listing, folder: str) -> dict[str, Any]:
    under = f"{folder}/" if folder else ""
    entries = [_entry(path, stored) for path, stored in listing.files.items() if path.startswith(under)]
    entries.sort(key=lambda entry: (entry["uploaded_at"] or "", entry["path"]))
    return {"data": entries}


def _path(raw: str) -> str:
    try:
        return clean_path(raw)
    except BadPath as exc:
        raise BadRequest(str(exc)) from None


async def _logged_path(access: FilesAccess, type: str, method: str, raw: str) -> str:
    """`_path` for a write: a refused path (a NUL or another control character, `..` above the
    root) is logged as the attempt it was, as every other refused write is."""
    try:
        return _path(raw)
    except BadRequest:
        await _log(access, FileEvent(type, method, raw, 400, {"path": raw}))
        raise


_ENTRY: dict[str, Any] = {
    "type": "object",
    "required": ["path", "size", "sha256"],
    "properties": {
        "path": {"type": "string"},
        "size": {"type": "integer"},
        "content_type": {"type": ["string", "null"]},
        "sha256": {"type": "string"},
        "uploaded_at": {"type": ["string", "null"]},
        "seeded": {"type": "boolean"},
        "metadata": {"type": "object"},
    },
}
_LISTING = listed(_ENTRY)


def files_router(access_of: Callable[..., FilesAccess]) -> APIRouter:
    """The routes over the `FilesAccess` the dependency `access_of` resolves per request."""
    router = APIRouter(tags=["sandbox: files"])

    @router.get("", responses=json_answer(_LISTING, "Every file, oldest first (`?prefix=` narrows)"))
    @router.get("/", include_in_schema=False)
    async def list_files(prefix: str = "", access: FilesAccess = Depends(access_of)) -> dict[str, Any]:
        listing: Listing = await _run(access.files.listing)
        return _listed(listing, _path(prefix))

    @router.get(
        "/{path:path}",
        responses={
            200: {
                "description": "The file's bytes in its content type, or a folder's listing",
                "content": {"application/json": {"schema": _LISTING}, "*/*": {"schema": {"type": "string"}}},
            }
        },
    )
    async def get_file(path: str, access: FilesAccess = Depends(access_of)) -> Response:
        clean = _path(path)
        listing: Listing = await _run(access.files.listing)
        if listing.kind(clean) == "folder":
            return _json_response(_listed(listing, clean))
        if clean not in listing.files:
            await _log(access, FileEvent("file_download", "GET", clean, 404, {"path": clean}))
            raise NotFound(f"no file at {clean}")
        data: bytes = await _run(access.files.read, clean)
        stored = listing.files[clean]
        await _log(access, FileEvent("file_download", "GET", clean, 200, {"path": clean, "bytes": len(data)}))
        return Response(
            data,
            media_type=str(stored.get("content_type") or "application/octet-stream"),
            headers={"ETag": f'"{stored.get("sha256", "")}"'},
        )

    @router.put(
        "/{path:path}",
        responses={**json_answer(_ENTRY, "Replaced"), **json_answer(_ENTRY, "Created", 201)},
    )
    async def put_file(path: str, request: Request, access: FilesAccess = Depends(access_of)) -> Response:
        clean = await _logged_path(access, "file_upload", "PUT", path)
        limit = access.max_file_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            await _log(
                access, FileEvent("file_upload", "PUT", clean, 413, {"path": clean, "size": int(declared)})
            )
            raise PayloadTooLarge(f"{clean} would be larger than the {limit}-byte limit for one file")
        body = await _read_capped(request, limit)
        if body is None:
            await _log(access, FileEvent("file_upload", "PUT", clean, 413, {"path": clean}))
            raise PayloadTooLarge(f"{clean} would be larger than the {limit}-byte limit for one file")
        content_type = request.headers.get("content-type") or None
        metadata = {
            name[len(_META_HEADER) :]: value
            for name, value in request.headers.items()
            if name.lower().startswith(_META_HEADER) and name[len(_META_HEADER) :]
        }
        request_log = {"path": clean, "size": len(body)}
        try:
            created, entry = await run_in_threadpool(_store, access, clean, body, content_type, metadata)
        except FilesError as exc:
            error = _domain(exc)
            await _log(access, FileEvent("file_upload", "PUT", clean, _status(error), request_log))
            raise error from None
        except OSError as exc:
            if not no_space(exc):
                raise
            await _log(access, FileEvent("file_upload", "PUT", clean, 507, request_log))
            raise InsufficientStorage() from None
        request_log["sha256"] = entry["sha256"]
        status = 201 if created else 200
        await _log(access, FileEvent("file_upload", "PUT", clean, status, request_log))
        return _json_response(entry, status)

    @router.delete("/{path:path}", status_code=204)
    async def delete_file(path: str, access: FilesAccess = Depends(access_of)) -> Response:
        clean = await _logged_path(access, "file_delete", "DELETE", path)

        def delete() -> None:
            with access.gate():
                access.files.delete(clean)

        try:
            await run_in_threadpool(delete)
        except FilesError as exc:
            error = _domain(exc)
            await _log(access, FileEvent("file_delete", "DELETE", clean, _status(error), {"path": clean}))
            raise error from None
        await _log(access, FileEvent("file_delete", "DELETE", clean, 204, {"path": clean}))
        return Response(status_code=204)

    return router


def _store(
    access: FilesAccess, path: str, body: bytes, content_type: str | None, metadata: dict[str, str]
) -> tuple[bool, dict[str, Any]]:
    """Stage the body outside the gate, move it in inside (nothing half-written, docs/api.md)."""
    storage = access.files.storage
    staged = storage.stage_bytes(body)
    try:
        with access.gate():
            created = access.files.listing().kind(path) is None
            record = access.files.commit(staged, path, content_type=content_type, metadata=metadata)
        staged = None  # type: ignore[assignment]
    finally:
        storage.discard(staged)
    return created, _entry(path, {
        "size": record.size, "content_type": record.content_type, "sha256": record.sha256,
        "uploaded_at": record.uploaded_at, "seeded": record.seeded, "metadata": dict(record.metadata),
    })  # fmt: skip


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it passes `limit` bytes (a chunked body declares no length)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _status(error: DomainError) -> int:
    return {BadRequest: 400, NotFound: 404, PayloadTooLarge: 413}.get(type(error), 409)


async def _log(access: FilesAccess, event: FileEvent) -> None:
    await run_in_threadpool(access.record, event)


def _json_response(body: Any, status: int = 200) -> Response:
    return JSONResponse(body, status_code=status)
