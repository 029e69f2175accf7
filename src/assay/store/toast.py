"""Which compression PostgreSQL gives large values (TOAST), for the migrations that choose lz4.

PostgreSQL compresses a value of more than ~2 KB before storing it, with pglz unless a column
says otherwise; pglz costs 3-5 times lz4's CPU for about the same size on our JSON (measured on
datasets, layer rows and event bodies: `docs/performance.md`), and that CPU is spent while the
inserting statement runs. A column switched to lz4 compresses only what is written from then on;
older values stay readable as they are. Servers without lz4 (before 14, or built without it) and
SQLite are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from alembic import op
from sqlalchemy import text

__all__ = ["set_compression"]


def _lz4_available() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    found = bind.execute(
        text("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return bool(found)


def set_compression(columns: Iterable[tuple[str, str]], method: str) -> None:
    """`ALTER TABLE … SET COMPRESSION method` ("lz4" or "default") for each (table, column), in a
    migration, where the server has lz4; nothing elsewhere."""
    if _lz4_available():
        for table, column in columns:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}")
