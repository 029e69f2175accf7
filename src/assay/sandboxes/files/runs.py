"""The task runs behind the files: SFTP logins, the gate, liveness and the event log, over the database.

`access_for` builds the `FilesAccess` both surfaces use for one `files` sandbox:

- **gate**: a transaction opened by the write gate (`sandboxes/gate.py::admit`: the sandbox row
  locked, then the task run checked), raising `SurfaceClosed` when it refuses. `complete` locks
  the same row before it captures and the teardown marks it torn down there, so a change to the
  tree commits wholly before the capture or is refused after it (docs/api.md, docs/snapshots.md).
- **alive**: the same check without the lock (`gate.closed_reason`), for reads and for closing
  sessions, on the read engine: it takes no turn in SQLite's write queue. The tree is read after
  the check either way, so a read racing `complete` was never held off by the check (it may see the
  final tree, which is what was captured); only changes must be, and they take the gate.
- **record**: `record_event` after the gate is released (it locks the same row).

`login` answers the SFTP listener, on the read engine too: the active `files` sandbox whose
credentials hold this username and password (compared in constant time), else None.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, Select, select

from assay.sandboxes.events import record_event
from assay.sandboxes.files.access import FileEvent, FilesAccess
from assay.sandboxes.files.errors import SurfaceClosed
from assay.sandboxes.files.storage import FileStorage
from assay.sandboxes.gate import SandboxClosed, admit, closed_reason
from assay.store.models import Playground, Sandbox

__all__ = ["access_for", "lock_for_capture", "login"]


def lock_for_capture(sandbox_id: str) -> Select[str]:
    """The read that waits for any change in flight on this sandbox (its row, locked): `complete`
    runs it before it captures."""
    return select(Sandbox.id).where(Sandbox.id == sandbox_id).with_for_update()


def access_for(
    engine: Engine,
    storage: FileStorage,
    *,
    read_engine: Engine,
    org_id: str,
    sandbox_id: str,
    playground_id: str,
    task_run_id: str,
    max_file_bytes: int,
) -> FilesAccess:
    @contextlib.contextmanager
    def gate() -> Iterator[None]:
        with engine.begin() as conn:
            try:
                admit(conn, sandbox_id)
            except SandboxClosed as closed:
                raise SurfaceClosed(closed.reason) from None
            yield

    def alive() -> bool:
        with read_engine.connect() as conn:
            return closed_reason(conn, sandbox_id) is None

    def record(event: FileEvent) -> None:
        record_event(
            engine,
            org_id=org_id,
            sandbox_id=sandbox_id,
            type=event.type,
            method=event.method,
            path="/" + event.path,
            status=event.status,
            request=_json(event.request),
            response=_json(event.response),
            task_run_id=task_run_id,
        )

    return FilesAccess(
        key=sandbox_id,
        files=storage.playground(playground_id),
        gate=gate,
        alive=alive,
        record=record,
        max_file_bytes=max_file_bytes,
        label=task_run_id,
    )


def _json(value: dict[str, Any] | None) -> bytes:
    return b"" if not value else json.dumps(value).encode("utf-8")


def login(
    engine: Engine,
    storage: FileStorage,
    username: str,
    password: str,
    *,
    read_engine: Engine,
    max_file_bytes: int,
) -> FilesAccess | None:
    query = (
        select(Sandbox.id, Sandbox.org_id, Sandbox.playground_id, Sandbox.credentials, Playground.task_run_id)
        .join(Playground, Playground.id == Sandbox.playground_id)
        .where(Sandbox.type == "files", Sandbox.status == "active")
    )
    with read_engine.connect() as conn:
        for row in conn.execute(query).all():
            credentials = row.credentials if isinstance(row.credentials, dict) else {}
            if credentials.get("username") != username:
                continue
            stored = str(credentials.get("password") or "")
            if not stored or not secrets.compare_digest(stored.encode(), password.encode()):
                return None
            if closed_reason(conn, row.id) is not None:
                return None
            return access_for(
                engine,
                storage,
                read_engine=read_engine,
                org_id=row.org_id,
                sandbox_id=row.id,
                playground_id=row.playground_id,
                task_run_id=row.task_run_id,
                max_file_bytes=max_file_bytes,
            )
    return None
