"""Errors of the verification core.

Tree::

    AssayError
    ├── AssertionInvalid      an assertion does not parse (unknown `assert`, bad key, bad path)
    ├── SnapshotError         a snapshot directory or archive cannot be read
    └── TaskFileError         a task file for `assay verify` cannot be read

Core errors carry no HTTP status; the service maps them to SPEC §5 in one place.
"""

from __future__ import annotations

__all__ = ["AssayError", "AssertionInvalid", "SnapshotError", "TaskFileError"]


class AssayError(Exception):
    """Base of every error the verification core raises on purpose."""


class AssertionInvalid(AssayError):
    """An assertion that does not parse.

    `errors` maps a dotted key path inside the assertion (`fields.0.operator`) to messages, the
    shape the HTTP API returns in a 422's `details`.
    """

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        first_key, messages = next(iter(errors.items()))
        where = f"{first_key}: " if first_key else ""
        super().__init__(f"{where}{messages[0]}")


class SnapshotError(AssayError):
    """A snapshot that cannot be opened: missing, not a directory or tar.gz, unsafe paths."""


class TaskFileError(AssayError):
    """A task file that cannot be read or has no `criteria` list."""
