"""Connections: the caller's when it passes one (inside its transaction), else a new transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine

__all__ = ["using"]


@contextmanager
def using(engine: Engine, conn: Connection | None) -> Iterator[Connection]:
    """`conn` as is (the caller commits), or a fresh connection committed on success.

    The service's SQLite discipline starts every transaction with `BEGIN IMMEDIATE`, so work
    done on behalf of a caller that already holds a transaction must reuse its connection:
    a second connection would wait on the first one's lock.
    """
    if conn is not None:
        yield conn
        return
    with engine.begin() as fresh:
        yield fresh
