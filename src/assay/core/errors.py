"""Errors of the verification core.

Tree::

    CoreError
    ├── AssertionInvalid      an assertion does not parse (unknown `assert`, bad key, bad path)
    ├── SnapshotError         a snapshot directory or archive cannot be read
    └── TaskFileError         a task file for `assay verify` cannot be read

Core errors carry no HTTP status; the service maps them to the error codes of docs/api.md in one place.
(`AssayError` is the SDK's: `assay.client` raises it for API errors; one name, one meaning.)
"""

from __future__ import annotations

__all__ = ["AssertionInvalid", "CoreError", "SnapshotError", "TaskFileError"]


class CoreError(Exception):
    """Base of every error the verification core raises on purpose."""


class AssertionInvalid(CoreError):
    """An assertion that does not parse.

    `errors` maps a dotted key path inside the assertion (`fields.0.operator`) to messages, the
    shape the HTTP API returns in a 422's `details`.
    """

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        first_key, messages = next(iter(errors.items()))
        where = f"{first_key}: " if first_key else ""
        super().__init__(f"{where}{messages[0]}")


class SnapshotError(CoreError):
    """A snapshot that cannot be opened: missing, not a directory or tar.gz, unsafe paths."""


class TaskFileError(CoreError):
    """A task file that cannot be read or has no `criteria` list."""
