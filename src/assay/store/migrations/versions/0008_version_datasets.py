"""A published version's dataset contents get a row each (for big datasets).

`frozen` held every dataset's content inline, so creating a run or starting one decoded all of
them. Versions published before this migration keep theirs inline and are read as before.

Revision ID: 0008_version_datasets
Revises: 0007_dataset_hash
Create Date: 2026-11-26 14:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_version_datasets"
down_revision = "0007_dataset_hash"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "benchmark_version_datasets",
        sa.Column("version_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["benchmark_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("version_id", "dataset_id"),
    )


def downgrade() -> None:
    op.drop_table("benchmark_version_datasets")
