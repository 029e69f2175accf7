"""What one caller may do to one playground's files: the tree, its gate, and where events go.

Both surfaces (the SFTP server and the files API) get a `FilesAccess` for the task run they
serve and go through the same three parts, so they cannot disagree about when writes are allowed
or what gets logged:

- `gate()` is held around every change to the tree. In the service it is a transaction that
  locks the playground's `files` sandbox row and raises `SurfaceClosed` unless the row is still
  active — the same row `complete` locks before it captures and tears down, so an upload racing
  `complete` either lands before the capture or is refused after it, never half-way (docs/api.md).
- `alive()` answers whether the task run still takes traffic (reads check it; no lock).
- `record(event)` appends a sandbox event (types `file_upload`, `file_download`,
  `file_delete`, `file_rename`); it is called after the gate is released.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from assay.sandboxes.files.tree import PlaygroundFiles

__all__ = ["FileEvent", "FilesAccess"]


@dataclass(frozen=True, slots=True)
class FileEvent:
    """One file interaction, as the event log keeps it."""

    type: str
    """`file_upload`, `file_download`, `file_delete` or `file_rename`."""
    method: str
    """The HTTP method, or `SFTP` for the SFTP server."""
    path: str
    status: int
    """The HTTP status, or the SFTP status code (0 is OK)."""
    request: dict[str, Any] = field(default_factory=dict)
    """What was asked: the path and, for uploads, size and sha256 — never the content."""
    response: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class FilesAccess:
    key: str
    """Identifies the playground's `files` sandbox (its id in the service)."""
    files: PlaygroundFiles
    gate: Callable[[], AbstractContextManager[None]]
    alive: Callable[[], bool]
    record: Callable[[FileEvent], None]
    max_file_bytes: int = 25 * 1024 * 1024
    label: str = ""
    """Who this is, for logs (the task run id)."""
