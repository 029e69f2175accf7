"""The change epoch on PostgreSQL: the sequence `assay_change_epoch` (`store/epoch.py`).

Bumped with `nextval` after every tracked commit and read with `SELECT last_value` by the agent
path of every instance. `CACHE 1` (the default, said aloud): each `nextval` moves the value every
other session reads at once. SQLite keeps its epoch in a file beside the database: nothing here.

Revision ID: 0009_change_epoch
Revises: 0008_version_datasets
Create Date: 2026-11-26 16:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0009_change_epoch"
down_revision = "0008_version_datasets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE SEQUENCE IF NOT EXISTS assay_change_epoch CACHE 1 NO CYCLE")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP SEQUENCE IF EXISTS assay_change_epoch")
