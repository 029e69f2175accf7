"""Domain errors raised below the HTTP layer; `assay.service.errors` maps each to an error code of docs/api.md
once.

Tree::

    DomainError
    ├── Unauthorized     no token, or one that is unknown or expired      → 401
    ├── Forbidden        a valid token of a kind that may not do this     → 403
    ├── NotFound         absent, or outside the caller's scope (no hint)  → 404
    ├── Conflict         state or reference forbids it (ended run, referenced row) → 409
    ├── Invalid          a well-formed body that fails validation         → 422
    ├── RateLimited      the token spent its request budget               → 429 + Retry-After
    ├── Busy             the database is saturated: waited and gave up    → 503 + Retry-After
    ├── Unavailable      a dependency is down, restarting or read-only    → 503 + Retry-After
    ├── InsufficientStorage  no space left for the write                  → 507
    ├── BadRequest       a malformed query parameter or cursor            → 400
    └── PayloadTooLarge  content over a size limit (a file over 25 MB)    → 413

Business logic raises these and never an HTTP exception.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "BadRequest",
    "Busy",
    "Conflict",
    "DomainError",
    "Forbidden",
    "InsufficientStorage",
    "Invalid",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "Unauthorized",
    "Unavailable",
]


class DomainError(Exception):
    def __init__(self, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})


class Unauthorized(DomainError):
    pass


class Forbidden(DomainError):
    pass


class NotFound(DomainError):
    @classmethod
    def of(cls, kind: str, ident: str) -> NotFound:
        return cls(f"{kind} {ident} not found")


class Conflict(DomainError):
    pass


class BadRequest(DomainError):
    pass


class RateLimited(DomainError):
    def __init__(self, retry_after: float):
        super().__init__(f"too many requests for this token; retry in {retry_after:.1f} s")
        self.retry_after = retry_after


class Busy(DomainError):
    """The request waited its bounded turn for the database (the SQLite write lock, a pooled
    PostgreSQL connection) and did not get it: answered 503 with `Retry-After`, never a hang."""

    def __init__(self, what: str, retry_after: float = 1.0):
        super().__init__(f"the server is busy ({what}); retry in {retry_after:.0f} s")
        self.retry_after = retry_after


class Unavailable(DomainError):
    """A dependency (`dependency`: "database", "object storage") is unreachable, restarting or
    read-only: answered 503 `SERVICE_UNAVAILABLE` with `Retry-After`, as a client retries it."""

    def __init__(self, dependency: str, retry_after: float = 1.0, message: str | None = None):
        super().__init__(
            message or f"the {dependency} is unavailable; retry in {retry_after:.0f} s",
            {"dependency": dependency, "retry_after": retry_after},
        )
        self.dependency = dependency
        self.retry_after = retry_after


class InsufficientStorage(DomainError):
    """A write that needs space found the disk full: 507 `INSUFFICIENT_STORAGE` (nothing of it kept)."""

    def __init__(self, message: str = "no space left for this write; free space (delete files) and retry"):
        super().__init__(message)


class Invalid(DomainError):
    """`details` maps a dotted key path to messages: `{"assertion.fields.0.operator": ["..."]}`."""

    def __init__(self, errors: Mapping[str, Sequence[str]], message: str | None = None):
        first = next(iter(errors), "")
        default = f"invalid value at {first}" if first else "invalid request body"
        super().__init__(message or default, {key: list(messages) for key, messages in errors.items()})


class PayloadTooLarge(DomainError):
    """Content over a configured size limit (docs/api.md: a file over 25 MB)."""
