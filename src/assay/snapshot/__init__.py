"""Snapshots (docs/snapshots.md): the captured state of a playground, on disk or as tar.gz."""

from assay.snapshot.reader import (
    SnapshotState,
    guess_content_type,
    open_snapshot,
    open_snapshot_files,
    snapshot_files,
)
from assay.snapshot.writer import SnapshotFile, SnapshotWriter, archive_snapshot, is_file_name, write_snapshot

__all__ = [
    "SnapshotFile",
    "SnapshotState",
    "SnapshotWriter",
    "archive_snapshot",
    "guess_content_type",
    "is_file_name",
    "open_snapshot",
    "open_snapshot_files",
    "snapshot_files",
    "write_snapshot",
]
