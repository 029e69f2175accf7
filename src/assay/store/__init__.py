"""Persistence: engine and sessions, tables, caller-scoped queries, pagination, tokens, migrations."""

from assay.store.database import Database, sqlite_url
from assay.store.errors import (
    BadRequest,
    Busy,
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    Unauthorized,
)
from assay.store.ids import iso, new_id, utcnow
from assay.store.pagination import Page, clamp_limit, paginate
from assay.store.scope import Caller, first_or_404, get_owned, owned, where_given

__all__ = [
    "BadRequest",
    "Busy",
    "Caller",
    "Conflict",
    "Database",
    "DomainError",
    "Forbidden",
    "Invalid",
    "NotFound",
    "Page",
    "RateLimited",
    "Unauthorized",
    "clamp_limit",
    "first_or_404",
    "get_owned",
    "iso",
    "new_id",
    "owned",
    "paginate",
    "sqlite_url",
    "utcnow",
    "where_given",
]
