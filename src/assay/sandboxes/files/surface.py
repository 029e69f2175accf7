"""The files sandbox on the `Surface` seam (docs/sandboxes.md, docs/assertions.md, docs/snapshots.md).

- dataset `files` `{files: [{path, content | content_base64}]}` and scenario step
  `drop_file_inbox {path, content | content_base64 | dataset_file}` write seeded files;
- `start` shows `credentials.sftp` `{host, port, username, password}` (the port the listener bound);
- traffic: the files API (`routes.py`) and the deployment's one SFTP listener (`sftp.py`);
- `complete` captures a pointer `{"storage": <url>, "prefix": <playground id>}` after waiting for
  any change in flight (the gate's row lock); the tree is final from then on (the teardown in the
  same transaction shuts the gate), so `rescore` and the state tar.gz read the same files.

The deployment's storage is opened once (`storage_of`) from its data dir and the `files` options —
`storage_url` (`ASSAY_STORAGE_URL`), `storage_options`, `max_file_bytes` — and a bad URL stops the
start-up: `listener()` opens it, and the app's lifespan (or the listener process) builds the
listeners first thing.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter, Depends
from sqlalchemy import Select, event
from sqlalchemy.orm import Session

from assay.core.state import FileRecord
from assay.sandboxes.files.access import FilesAccess
from assay.sandboxes.files.errors import BadPath, FilesError
from assay.sandboxes.files.hostkey import load_host_key
from assay.sandboxes.files.paths import clean_path
from assay.sandboxes.files.routes import files_router
from assay.sandboxes.files.runs import access_for, lock_for_capture, login
from assay.sandboxes.files.sftp import SftpListener
from assay.sandboxes.files.storage import (
    PARTIAL_GRACE_SECONDS,
    FileStorage,
    StorageError,
    open_storage,
    storage_settings,
)
from assay.sandboxes.files.tools import TOOLS
from assay.sandboxes.files.tree import PlaygroundFiles
from assay.sandboxes.options import Option, not_negative
from assay.sandboxes.surface import (
    BaseSurface,
    Deployment,
    ProvisionFailed,
    Purge,
    RunContext,
    SandboxHandle,
    ScenarioStep,
    StateView,
    SurfaceTarget,
    deployment_of,
)
from assay.snapshot import SnapshotFile, SnapshotWriter
from assay.store.models import Sandbox

__all__ = ["DEFAULT_MAX_FILE_BYTES", "FilesSandbox", "FilesView", "max_file_bytes", "storage_of"]

DEFAULT_MAX_FILE_BYTES = 25 * 1024 * 1024
"""A file is at most 25 MB (`ASSAY_MAX_FILE_BYTES`)."""

log = logging.getLogger("assay.files")

_STORAGE_KEY = "files.storage"
_OPENED: dict[str, FileStorage] = {}
_OPENED_LOCK = threading.Lock()


def max_file_bytes(deployment: Deployment | None = None) -> int:
    configured = deployment.option("files", "max_file_bytes") if deployment is not None else None
    if configured is None:
        raw = os.environ.get("ASSAY_MAX_FILE_BYTES", "")
        configured = int(raw) if raw.isdigit() else DEFAULT_MAX_FILE_BYTES
    return int(configured)


def _data_dir(deployment: Deployment) -> Path:
    return deployment.data_dir or Path(os.environ.get("ASSAY_DATA_DIR") or ".assay")


def storage_of(deployment: Deployment) -> FileStorage:
    """The deployment's storage, opened and probed once; `StorageError` names a bad URL.

    From the deployment's `files` options (`FilesSandbox.options`), else from
    `ASSAY_STORAGE_URL` / `ASSAY_STORAGE_OPTIONS` / `ASSAY_DATA_DIR` (a deployment made without
    options, e.g. by the sweeper)."""
    found = deployment.runtime.get(_STORAGE_KEY)
    if isinstance(found, FileStorage):
        return found
    configured = deployment.options.get("files")
    if configured:
        environment = {
            "ASSAY_STORAGE_URL": configured.get("storage_url") or "",
            "ASSAY_STORAGE_OPTIONS": configured.get("storage_options") or "",
        }
        url, options = storage_settings(environment)
    else:
        url, options = storage_settings()
    storage = open_storage(url, _data_dir(deployment), options)
    deployment.runtime[_STORAGE_KEY] = storage
    with _OPENED_LOCK:
        _OPENED.setdefault(storage.url, storage)
    return storage


def _storage_at(url: str, session: Session | None) -> FileStorage:
    """The storage a pointer names: the deployment's when it is that one, else opened by URL."""
    if session is not None:
        storage = storage_of(deployment_of(session.connection().engine))
        if storage.url == url:
            return storage
    with _OPENED_LOCK:
        found = _OPENED.get(url)
    if found is not None:
        return found
    _, options = storage_settings()
    storage = open_storage(url, Path(os.environ.get("ASSAY_DATA_DIR") or ".assay"), options)
    with _OPENED_LOCK:
        return _OPENED.setdefault(url, storage)


# -- datasets and scenario steps ---------------------------------------------------------------


def _content(item: Mapping[str, Any], where: str, limit: int) -> tuple[bytes | None, dict[str, list[str]]]:
    """The bytes of a `{content | content_base64}` item, or the problems keyed by field."""
    has_text, has_b64 = "content" in item, "content_base64" in item
    if has_text == has_b64:
        return None, {where: ["give exactly one of content and content_base64"]}
    data: bytes | None
    if has_text:
        if not isinstance(item["content"], str):
            return None, {f"{where}.content": ["must be a string (UTF-8 text)"]}
        data = item["content"].encode("utf-8")
    else:
        raw = item["content_base64"]
        try:
            data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
        except (binascii.Error, ValueError):
            data = None
        if data is None:
            return None, {f"{where}.content_base64": ["must be base64 text"]}
    if len(data) > limit:
        return None, {where: [f"the file is {len(data)} bytes; the limit is {limit}"]}
    return data, {}


def _file_path(item: Mapping[str, Any], where: str) -> tuple[str | None, dict[str, list[str]]]:
    raw = item.get("path")
    if not isinstance(raw, str):
        return None, {f"{where}.path": ["required: a path relative to the SFTP root"]}
    try:
        path = clean_path(raw)
    except BadPath as exc:
        return None, {f"{where}.path": [str(exc)]}
    if not path:
        return None, {f"{where}.path": ["names the root folder, not a file"]}
    return path, {}


def check_files_dataset(data: Any, limit: int) -> dict[str, list[str]]:
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return {"data.files": ["a files dataset is {files: [{path, content | content_base64}]}"]}
    problems: dict[str, list[str]] = {}
    for i, item in enumerate(data["files"]):
        where = f"data.files.{i}"
        if not isinstance(item, dict):
            problems[where] = ["must be an object {path, content | content_base64}"]
            continue
        problems.update(_file_path(item, where)[1])
        problems.update(_content(item, where, limit)[1])
    return problems


def _drop_file_inbox(run: RunContext, sandbox: Sandbox, step: Mapping[str, Any]) -> None:
    """`dataset_file` names a file the task's `files` datasets loaded (they load before
    the scenario); it is copied to `path` (docs/decisions/files.md)."""
    path, problems = _file_path(step, "drop_file_inbox")
    files = storage_of(run.deployment).playground(run.playground_id)
    if path is None:
        raise ProvisionFailed(f"scenario step drop_file_inbox: {_first(problems)}")
    source = step.get("dataset_file")
    if source is not None:
        data = _dataset_file(files, source)
    else:
        found, problems = _content(step, "drop_file_inbox", max_file_bytes(run.deployment))
        if found is None:
            raise ProvisionFailed(f"scenario step drop_file_inbox: {_first(problems)}")
        data = found
    try:
        files.seed(path, data)
    except FilesError as exc:
        raise ProvisionFailed(f"scenario step drop_file_inbox: {exc}") from None
    files.record_baseline()


def _dataset_file(files: PlaygroundFiles, source: Any) -> bytes:
    """The content of a seeded file, or `ProvisionFailed` naming `source`."""
    try:
        clean = clean_path(str(source))
        if files.listing().files.get(clean, {}).get("seeded"):
            return files.read(clean)
    except FilesError:
        pass
    raise ProvisionFailed(
        f"scenario step drop_file_inbox: dataset_file {source!r} is not a file of the task's files datasets"
    )


def _first(problems: Mapping[str, list[str]]) -> str:
    key, messages = next(iter(problems.items()))
    return f"{key}: {messages[0]}"


# -- captured state ----------------------------------------------------------------------------


class FilesView(StateView):
    """The captured tree: records from the sidecar, content from the storage."""

    def __init__(self, files: PlaygroundFiles | None):
        self.tree = files
        self._records: list[FileRecord] | None = None

    def files(self) -> Sequence[FileRecord]:
        if self._records is None:
            self._records = self.tree.records() if self.tree is not None else []
        return self._records

    def baseline(self) -> dict[str, str] | None:
        """What `start` seeded, digest by path; None without a tree or for one seeded before the
        baseline was recorded (`no-unexpected-changes` then says `error`)."""
        return None if self.tree is None else self.tree.baseline()

    def digests(self) -> dict[str, str]:
        return {record.path: record.sha256 for record in self.files()}

    def read_file(self, path: str) -> bytes:
        if self.tree is None:
            raise FileNotFoundError(path)
        try:
            return self.tree.read(clean_path(path))
        except FilesError:
            raise FileNotFoundError(path) from None


def _prepare(deployment: Deployment) -> FileStorage:
    """Open the storage as the SFTP listener starts, and remove what writers that died left set
    aside: all of the previous listener's (one listener per deployment: it is gone), the rest
    once older than `PARTIAL_GRACE_SECONDS` (an API worker may be mid-upload right now)."""
    storage = storage_of(deployment)
    removed = storage.sweep_partials(listener_gone=True, older_than=PARTIAL_GRACE_SECONDS)
    if removed:
        log.info("removed %d abandoned partial upload(s) from %s", len(removed), storage.url)
    return storage


def _remove_trees(storage: FileStorage, prefixes: Sequence[str], whose: str = "deleted playground") -> None:
    """Never raises (the transaction has ended by now): a tree that cannot be removed is logged.
    Any exception counts: an object store's client raises its own kinds besides OSError."""
    for prefix in prefixes:
        key = storage.key(prefix)
        try:
            if storage.fs.exists(key):
                storage.fs.rm(key, recursive=True)
        except Exception as exc:
            log.warning("could not remove the files of %s %s at %s: %s", whose, prefix, key, exc)


class FilesSandbox(BaseSurface):
    tools = TOOLS
    name = "files"
    dataset_type = "files"
    dataset_files = "/"  # a folder of the files themselves
    state_fields = frozenset({"files", "read_file"})
    scenario_steps: Mapping[str, ScenarioStep] = MappingProxyType({"drop_file_inbox": _drop_file_inbox})
    options = MappingProxyType(
        {  # the variables deployments use (docs/deployment.md), not ASSAY_FILES_*
            "port": Option(int, 2222, "ASSAY_SFTP_PORT", not_negative),
            "storage_url": Option(str, None, "ASSAY_STORAGE_URL"),  # s3://, gs://, file://
            "storage_options": Option(str, None, "ASSAY_STORAGE_OPTIONS"),  # JSON: fsspec options
            "max_file_bytes": Option(int, DEFAULT_MAX_FILE_BYTES, "ASSAY_MAX_FILE_BYTES", not_negative),
            "max_auth_tries": Option(int, 6, "ASSAY_SFTP_MAX_AUTH_TRIES", not_negative),
            "auth_backoff": Option(float, 0.5, "ASSAY_SFTP_AUTH_BACKOFF", not_negative),
            "auth_backoff_max": Option(float, 10.0, "ASSAY_SFTP_AUTH_BACKOFF_MAX", not_negative),
        }
    )

    def purge(self, gone: Purge) -> None:
        """Remove the playgrounds' trees once the deletion has committed: a rolled-back one keeps
        them, as its runs still point at them."""
        storage = storage_of(gone.deployment)
        prefixes = list(gone.playground_ids)
        event.listen(gone.session, "after_commit", lambda _: _remove_trees(storage, prefixes), once=True)

    def discard(self, playground_id: str, deployment: Deployment) -> None:
        """The tree a start that did not commit seeded: no playground row names it."""
        try:
            storage = storage_of(deployment)
        except StorageError as exc:  # then the seed wrote nothing either
            log.warning("could not open the storage to remove playground %s: %s", playground_id, exc)
            return
        _remove_trees(storage, [playground_id], "rolled-back start, playground")

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        return check_files_dataset(data, max_file_bytes())

    def provision(self, run: RunContext) -> dict[str, Any] | None:
        suffix = run.task_run_id.removeprefix("tr_")[-10:].lower()
        return {"username": f"tr-{suffix}", "password": secrets.token_urlsafe(18)}

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        files = storage_of(run.deployment).playground(run.playground_id)
        for dataset in datasets:
            data = dataset.get("data") or {}
            for item in data.get("files") or []:
                path, _ = _file_path(item, "")
                content, _ = _content(item, "", max_file_bytes(run.deployment))
                if path is None or content is None:
                    raise ProvisionFailed(
                        f"files dataset {dataset.get('id')} has an invalid file: {item.get('path')!r}"
                    )
                try:
                    files.seed(path, content)
                except FilesError as exc:
                    raise ProvisionFailed(f"files dataset {dataset.get('id')}: {exc}") from None
        files.record_baseline()

    def endpoints(self, base: str) -> dict[str, str]:
        return {"files": f"{base}/files"}

    def credentials(self, sandbox: Sandbox, host: str, deployment: Deployment) -> dict[str, Any]:
        stored = sandbox.credentials or {}
        return {
            "sftp": {
                "host": host,
                "port": deployment.port("files", 2222),
                "username": stored.get("username"),
                "password": stored.get("password"),
            }
        }

    def router(self, target: SurfaceTarget) -> APIRouter:
        def access(handle: SandboxHandle = Depends(target)) -> FilesAccess:
            deployment = handle.deployment
            return access_for(
                deployment.engine,
                storage_of(deployment),
                read_engine=deployment.read_engine,
                org_id=handle.org_id,
                sandbox_id=handle.sandbox_id,
                playground_id=handle.playground_id,
                task_run_id=handle.task_run_id,
                max_file_bytes=max_file_bytes(deployment),
            )

        return files_router(access)

    def listener(self, deployment: Deployment) -> SftpListener:
        """The SFTP listener. Its `start` opens the storage first, so a bad `ASSAY_STORAGE_URL`
        stops the start-up (and the listeners already started are stopped); building it touches
        neither disk nor database (`serve` builds one only to ask whether there is one)."""
        limit = max_file_bytes(deployment)

        def authenticate(username: str, password: str) -> FilesAccess | None:
            storage = storage_of(deployment)
            return login(
                deployment.engine,
                storage,
                username,
                password,
                read_engine=deployment.read_engine,
                max_file_bytes=limit,
            )

        return SftpListener(
            authenticate,
            lambda: load_host_key(_data_dir(deployment)),
            host=deployment.host,
            port=deployment.port("files", 2222),
            watch_interval=float(deployment.option("files", "watch_interval", 1.0)),
            prepare=lambda: _prepare(deployment),
            max_auth_tries=int(deployment.option("files", "max_auth_tries", 6)),
            auth_backoff=float(deployment.option("files", "auth_backoff", 0.5)),
            auth_backoff_max=float(deployment.option("files", "auth_backoff_max", 10.0)),
        )

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any]:
        return lock_for_capture(sandbox_id)

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        return {"storage": storage_of(deployment).url, "prefix": playground_id}

    def read(self, pointer: Any, session: Session | None) -> FilesView:
        if not isinstance(pointer, dict) or not pointer.get("storage") or not pointer.get("prefix"):
            return FilesView(None)
        storage = _storage_at(str(pointer["storage"]), session)
        return FilesView(storage.playground(str(pointer["prefix"])))

    def snapshot(self, view: StateView, writer: SnapshotWriter) -> None:
        if not isinstance(view, FilesView):
            return
        baseline = view.baseline()
        if baseline is not None:
            writer.add_baseline(self.name, baseline)
        for record in view.files():
            writer.add_file(
                SnapshotFile(
                    path=record.path,
                    content=view.read_file(record.path),
                    uploaded_at=record.uploaded_at,
                    seeded=record.seeded,
                    content_type=record.content_type,
                    metadata=record.metadata,
                )
            )
