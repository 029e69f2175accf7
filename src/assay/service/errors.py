"""The one place errors become the envelope of docs/api.md `{"error": {"code", "message", "details"}}`.

Mapping (everything else is a bug and a 500 `INTERNAL_ERROR`)::

    store.errors.Unauthorized        401 UNAUTHORIZED
    store.errors.Forbidden           403 FORBIDDEN
    store.errors.NotFound            404 NOT_FOUND
    store.errors.Conflict            409 CONFLICT
    sqlalchemy IntegrityError        409 CONFLICT   (a unique or foreign key the action did not foresee)
    sqlalchemy DataError, OverflowError  422 VALIDATION_ERROR (a value the database cannot hold)
    store.errors.Invalid             422 VALIDATION_ERROR
    core.errors.AssertionInvalid     422 VALIDATION_ERROR
    RequestValidationError           400 BAD_REQUEST for unparseable JSON or a bad query/path value,
                                     else 422 VALIDATION_ERROR keyed by the dotted body path
    store.errors.RateLimited         429 RATE_LIMITED, with `Retry-After` (whole seconds)
    store.errors.Busy                503 UNAVAILABLE, with `Retry-After`: a bounded wait for the
    sqlalchemy TimeoutError          database ran out (write lock, pooled connection, SQLite's
    "database is locked"             busy timeout across processes); saturation is never a 500
    store.errors.Unavailable         503 SERVICE_UNAVAILABLE, with `Retry-After` and `details.dependency`:
    an outage (`store.faults.outage`)    the database or object store is unreachable, restarting or
                                     read-only (a driver error, wherever it is raised); never a 500
    store.errors.InsufficientStorage 507 INSUFFICIENT_STORAGE: a write that needs space found the
    a full disk (`store.faults`)     disk full (ENOSPC, SQLite's "database or disk is full")
    store.errors.BadRequest          400 BAD_REQUEST
    store.errors.PayloadTooLarge     413 PAYLOAD_TOO_LARGE (the body limit's code too)
    HTTPException (routing)          its status: 404 NOT_FOUND, 405, 413 (body over the limit), …
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from assay.core.errors import AssertionInvalid
from assay.store.errors import (
    BadRequest,
    Busy,
    Conflict,
    DomainError,
    Forbidden,
    InsufficientStorage,
    Invalid,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
    Unavailable,
)
from assay.store.faults import RETRY_AFTER, no_space, note_no_space, outage

__all__ = ["ERROR_RESPONSES", "ErrorEnvelope", "envelope", "install_error_handlers"]

log = logging.getLogger("assay.service")

_DOMAIN: list[tuple[type[DomainError], int, str]] = [
    (Unauthorized, 401, "UNAUTHORIZED"),
    (Forbidden, 403, "FORBIDDEN"),
    (NotFound, 404, "NOT_FOUND"),
    (Conflict, 409, "CONFLICT"),
    (Invalid, 422, "VALIDATION_ERROR"),
    (BadRequest, 400, "BAD_REQUEST"),
    (PayloadTooLarge, 413, "PAYLOAD_TOO_LARGE"),
    (RateLimited, 429, "RATE_LIMITED"),
]
_HTTP_CODES = {status: code for _, status, code in _DOMAIN}
"""The envelope code of an HTTPException's status (routing's 404, 405, 413 …): the domain table's."""


class ErrorBody(BaseModel):
    code: str
    """`BAD_REQUEST`, `VALIDATION_ERROR`, `UNAUTHORIZED`, `FORBIDDEN`, `NOT_FOUND`, `CONFLICT`,
    `PAYLOAD_TOO_LARGE`, `RATE_LIMITED`, `UNAVAILABLE` (503, saturated: retry after `Retry-After`),
    `SERVICE_UNAVAILABLE` (503, `details.dependency` is down: retry after `Retry-After`),
    `INSUFFICIENT_STORAGE` (507, the disk is full) or `INTERNAL_ERROR`."""
    message: str
    details: dict[str, Any]
    """For `VALIDATION_ERROR`: dotted key path → messages, e.g. `assertion.fields.0.operator`."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class ErrorEnvelope(BaseModel):
    """Every error response (docs/api.md)."""

    error: ErrorBody


_RETRY_AFTER = {
    "Retry-After": {"description": "Whole seconds to wait before retrying", "schema": {"type": "integer"}}
}
_AUTHENTICATE = {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}}

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {
        "model": ErrorEnvelope,
        "description": description,
        **({"headers": headers} if headers else {}),
    }
    for status, description, headers in (
        (400, "`BAD_REQUEST`: unparseable JSON, or a bad path or query parameter", None),
        (401, "`UNAUTHORIZED`: missing, unknown or expired token", _AUTHENTICATE),
        (403, "`FORBIDDEN`: a token of a kind that may not call this endpoint", None),
        (404, "`NOT_FOUND`: not found, or outside the token's scope", None),
        (409, "`CONFLICT`: the run's state or a reference forbids it", None),
        (413, "`PAYLOAD_TOO_LARGE`: the body is over the size limit", None),
        (422, "`VALIDATION_ERROR`: a well-formed body that fails validation; `details` names each key", None),
        (429, "`RATE_LIMITED`: the token spent its request budget (`ASSAY_RATE_LIMIT`)", _RETRY_AFTER),
        (
            503,
            "`UNAVAILABLE`: the database is saturated; `SERVICE_UNAVAILABLE`: the database or object "
            "storage (`details.dependency`) is unreachable, restarting or read-only; retry after "
            "`Retry-After`",
            _RETRY_AFTER,
        ),
    )
}
"""OpenAPI documentation of the envelope: every status an API route can answer with it, attached
to every router (the sandbox surfaces' when the app mounts them; FHIR's own answers take precedence)."""


def envelope(status: int, code: str, message: str, details: Mapping[str, Any] | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = {"error": {"code": code, "message": message, "details": dict(details or {})}}
    return JSONResponse(body, status_code=status, headers=headers)


def _busy(retry_after: float, message: str) -> JSONResponse:
    response = envelope(503, "UNAVAILABLE", message, {"retry_after": retry_after})
    response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return response


def _unavailable(dependency: str, retry_after: float, message: str | None = None) -> JSONResponse:
    message = message or f"the {dependency} is unavailable (unreachable, restarting or read-only); retry"
    response = envelope(
        503, "SERVICE_UNAVAILABLE", message, {"dependency": dependency, "retry_after": retry_after}
    )
    response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return response


def _full_disk(request: Request) -> JSONResponse:
    """507, and the data dir's disk noted full for `/healthz` until space is freed."""
    data_dir = getattr(getattr(request.app.state, "settings", None), "data_dir", None)
    if data_dir is not None:
        note_no_space(data_dir)
    return envelope(507, "INSUFFICIENT_STORAGE", InsufficientStorage().message)


def _fault(request: Request, exc: Exception) -> JSONResponse | None:
    """The answer for a dependency's fault (`store.faults`), logged once as a warning; None for the rest."""
    if no_space(exc):
        log.warning("no space left for a write: %s", exc)
        return _full_disk(request)
    dependency = outage(exc)
    if dependency is not None:
        log.warning("the %s is unavailable: %s", dependency, exc)
        return _unavailable(dependency, RETRY_AFTER)
    return None


def _domain(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    if isinstance(exc, Busy):
        return _busy(exc.retry_after, exc.message)
    if isinstance(exc, Unavailable):
        return _unavailable(exc.dependency, exc.retry_after, exc.message)
    if isinstance(exc, InsufficientStorage):
        return _full_disk(request)
    if isinstance(exc, RateLimited):
        response = envelope(429, "RATE_LIMITED", exc.message, {"retry_after": exc.retry_after})
        response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        return response
    for kind, status, code in _DOMAIN:
        if isinstance(exc, kind):
            return envelope(status, code, exc.message, exc.details)
    return envelope(500, "INTERNAL_ERROR", exc.message)


def _assertion(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AssertionInvalid)
    return envelope(422, "VALIDATION_ERROR", str(exc), exc.errors)


def _dotted(loc: tuple[Any, ...]) -> str:
    parts = list(loc[1:]) if loc and loc[0] == "body" else list(loc)
    return ".".join(str(part) for part in parts)


def _validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(error.get("type") == "json_invalid" for error in errors):
        return envelope(400, "BAD_REQUEST", "request body is not valid JSON")
    details: dict[str, list[str]] = {}
    bad_request = False
    for error in errors:
        loc = tuple(error.get("loc", ()))
        bad_request = bad_request or (bool(loc) and loc[0] in ("query", "path", "header"))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if error.get("type") == "missing":
            message = "field required"
        details.setdefault(_dotted(loc) or "body", []).append(message)
    first = next(iter(details))
    if bad_request:
        return envelope(400, "BAD_REQUEST", f"invalid parameter {first}", details)
    return envelope(422, "VALIDATION_ERROR", f"invalid value at {first}: {details[first][0]}", details)


def _integrity(_request: Request, exc: Exception) -> JSONResponse:
    log.info("integrity error mapped to 409: %s", exc)
    return envelope(409, "CONFLICT", "the change conflicts with existing data")


def _data(_request: Request, exc: Exception) -> JSONResponse:
    log.info("data error mapped to 422: %s", exc)
    return envelope(422, "VALIDATION_ERROR", "a value is too large or too long for the database")


def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "BAD_REQUEST" if exc.status_code < 500 else "INTERNAL_ERROR")
    return envelope(exc.status_code, code, str(exc.detail))


def _pool_timeout(_request: Request, exc: Exception) -> JSONResponse:
    log.warning("no pooled database connection in time: %s", exc)
    return _busy(1, "the server is busy (no database connection free); retry in 1 s")


def _operational(request: Request, exc: Exception) -> JSONResponse:
    """SQLite's busy timeout between processes (`--workers N` on one file) is saturation, a 503;
    so is PostgreSQL out of connection slots; an outage or a full disk is its own answer
    (`_fault`); any other operational error is a 500."""
    if "database is locked" in str(exc):
        log.warning("SQLite busy timeout: %s", exc)
        return _busy(1, "the server is busy (the database is locked); retry in 1 s")
    if _too_many_connections(exc):
        log.warning("PostgreSQL refused a new connection: %s", exc)
        return _busy(1, "the server is busy (the database has no connection slot free); retry in 1 s")
    return _internal(request, exc)


def _too_many_connections(exc: Exception) -> bool:
    """PostgreSQL's `too_many_connections` (SQLSTATE 53300, "sorry, too many clients already"): the
    server's `max_connections` is shared by every instance, so it is saturation like an empty pool.
    psycopg raises it while connecting, before any SQLSTATE is attached, so the text is read too."""
    original = getattr(exc, "orig", None)
    return getattr(original, "sqlstate", None) == "53300" or "too many clients already" in str(exc)


def _internal(request: Request, exc: Exception) -> JSONResponse:
    """A 500, unless `exc` is a dependency's fault (`_fault`): a lost connection is an
    `InterfaceError` or `InternalError` too, not only an `OperationalError`, and a full disk an
    `OSError` wherever it is raised."""
    answer = _fault(request, exc)
    if answer is not None:
        return answer
    log.exception("unhandled error", exc_info=exc)
    return envelope(500, "INTERNAL_ERROR", "internal error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain)
    app.add_exception_handler(AssertionInvalid, _assertion)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(IntegrityError, _integrity)
    app.add_exception_handler(DataError, _data)
    app.add_exception_handler(OverflowError, _data)
    app.add_exception_handler(PoolTimeout, _pool_timeout)
    app.add_exception_handler(OperationalError, _operational)
    # Registered by class so they are answered here rather than re-raised past the app.
    app.add_exception_handler(DBAPIError, _internal)
    app.add_exception_handler(OSError, _internal)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _internal)
