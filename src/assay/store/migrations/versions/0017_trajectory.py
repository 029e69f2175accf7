"""Trajectory steps: the agent's messages and the tool calls executed for it, per task run.

Revision ID: 0017_trajectory
Revises: 0016_voice_line
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0017_trajectory", "0016_voice_line"  # written 2026-11-28
branch_labels = depends_on = None


def upgrade() -> None:
    op.create_table(
        "trajectory_steps",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("task_run_id", sa.String(length=40), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("step", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_run_id"], ["task_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_trajectory_steps_org_id", "trajectory_steps", ["org_id"])
    op.create_index("ix_trajectory_steps_task_run_id", "trajectory_steps", ["task_run_id"])


def downgrade() -> None:
    op.drop_table("trajectory_steps")
