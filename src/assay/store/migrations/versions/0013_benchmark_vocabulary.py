"""A benchmark's own vocabulary: lexicon entries the voice vocabulary tier adds to the built-in
ones, frozen with each published version and each task run so a rescore reads the same list.

Revision ID: 0013_benchmark_vocabulary
Revises: 0012_event_lz4
Create Date: 2026-11-28 01:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_benchmark_vocabulary"
down_revision = "0012_event_lz4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("benchmarks") as batch_op:
        batch_op.add_column(sa.Column("vocabulary", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("benchmarks") as batch_op:
        batch_op.drop_column("vocabulary")
