"""Dataset contents compressed with lz4 on PostgreSQL (for big datasets).

A dataset's `data` is a large JSON value, so PostgreSQL compresses it into TOAST storage, by
default with pglz: inserting a 0.5 MB Synthea bundle cost 24.8 ms per MB in the backend (lz4: 5.6,
and 56 KB stored instead of 134 KB), most of the 1,024-patient upload's time on PostgreSQL.
Only values written from now on are compressed with lz4; older ones stay readable as they are.
Servers without lz4 (before PostgreSQL 14, or built without it) and SQLite are left alone.
"""

from __future__ import annotations

from assay.store.toast import set_compression

revision, down_revision = "0010_dataset_lz4", "0009_change_epoch"  # written 2026-11-27
branch_labels = depends_on = None

_COLUMNS = (("datasets", "data"), ("benchmark_version_datasets", "data"))
"""The dataset contents: uploaded, and copied when a version is published."""


def upgrade() -> None:
    set_compression(_COLUMNS, "lz4")


def downgrade() -> None:
    set_compression(_COLUMNS, "default")
