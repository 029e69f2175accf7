"""Errors of the Assay SDK: one class per error code of docs/api.md, each carrying the envelope.

Tree::

    AssayError                  anything the API answered with an error envelope, or never answered
    ├── APIConnectionError      no HTTP answer at all (refused, reset, timed out)
    └── APIStatusError          an HTTP error status; `code`, `message`, `details` from the envelope
        ├── BadRequestError         400 BAD_REQUEST
        ├── AuthenticationError     401 UNAUTHORIZED
        ├── PermissionDeniedError   403 FORBIDDEN
        ├── NotFoundError           404 NOT_FOUND
        ├── ConflictError           409 CONFLICT
        ├── ValidationError         422 VALIDATION_ERROR (`details`: dotted key path → messages)
        ├── RateLimitError          429 RATE_LIMITED (`retry_after` seconds, after the retries ran out)
        └── InternalServerError     5xx INTERNAL_ERROR (and 503s that outlasted the retries)

Only `assay.client` raises these; the verification core's own errors live in `assay.core.errors`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "AssayError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ValidationError",
]


class AssayError(Exception):
    """Base of every error the SDK raises."""

    code: str = "CONNECTION_ERROR"
    status_code: int | None = None

    def __init__(
        self, message: str, *, details: dict[str, Any] | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.retry_after = retry_after
        """Seconds the server asked us to wait (`Retry-After`), when it said."""


class APIConnectionError(AssayError):
    """The request got no HTTP answer (connection refused or reset, timeout)."""


class APIStatusError(AssayError):
    """The API answered with an error status and the envelope of docs/api.md."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status_code: int,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ):
        super().__init__(message, details=details, retry_after=retry_after)
        self.code = code
        self.status_code = status_code
        self.response = response

    def __str__(self) -> str:
        return f"{self.status_code} {self.code}: {self.message}"


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class ValidationError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: ValidationError,
    429: RateLimitError,
}


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None if absent/bad."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The most specific error for an error response; a body that is not the envelope still gives
    its status, with the text as the message."""
    code, message = f"HTTP_{response.status_code}", response.reason_phrase
    details: dict[str, Any] = {}
    try:
        body = response.json()
        error = body["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError):
        if response.text:
            message = response.text[:500]
    kind = _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = InternalServerError if response.status_code >= 500 else APIStatusError
    return kind(
        message,
        code=code,
        status_code=response.status_code,
        details=details,
        retry_after=retry_after(response),
        response=response,
    )
