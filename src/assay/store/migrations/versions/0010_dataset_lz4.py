"""Dataset contents compressed with lz4 on PostgreSQL (issue 9: big datasets).

A dataset's `data` is a large JSON value, so PostgreSQL compresses it into TOAST storage, by
default with pglz: inserting a 0.5 MB Synthea bundle cost 24.8 ms per MB in the backend (lz4: 5.6,
and 56 KB stored instead of 134 KB), most of the 1,024-patient upload's time on PostgreSQL.
Only values written from now on are compressed with lz4; older ones stay readable as they are.
Servers without lz4 (before PostgreSQL 14, or built without it) and SQLite are left alone.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision, down_revision = "0010_dataset_lz4", "0009_change_epoch"  # written 2026-11-27
branch_labels = depends_on = None

_COLUMNS = (("datasets", "data"), ("benchmark_version_datasets", "data"))
"""The dataset contents: uploaded, and copied when a version is published."""


def _lz4_available() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    found = bind.execute(
        text("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return bool(found)


def upgrade() -> None:
    if _lz4_available():
        for table, column in _COLUMNS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")


def downgrade() -> None:
    if _lz4_available():
        for table, column in _COLUMNS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION default")
