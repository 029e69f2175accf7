"""A task's reference solution: the scripted surface actions its self-test replays.

Revision ID: 0005_task_reference
Revises: 0004_hl7_voice, 0004_x12
Create Date: 2026-11-26 07:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_task_reference"
down_revision = ("0004_hl7_voice", "0004_x12")  # also the merge point of the two 0004 branches
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch_op:
        batch_op.add_column(sa.Column("reference", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch_op:
        batch_op.drop_column("reference")
