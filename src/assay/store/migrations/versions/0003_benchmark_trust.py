"""Benchmark trust: required and idle-ok criteria, repeated trials, the gate that zeroed
a task run, and human overrides of criterion runs.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 06:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("criteria") as batch_op:
        batch_op.add_column(sa.Column("required", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("idle_ok", sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table("benchmark_runs") as batch_op:
        batch_op.add_column(sa.Column("trials", sa.Integer(), server_default="1", nullable=False))
    with op.batch_alter_table("task_runs") as batch_op:
        batch_op.add_column(sa.Column("trial", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("gate", sa.JSON(), nullable=True))
    with op.batch_alter_table("criterion_runs") as batch_op:
        batch_op.add_column(sa.Column("override", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("criterion_runs") as batch_op:
        batch_op.drop_column("override")
    with op.batch_alter_table("task_runs") as batch_op:
        batch_op.drop_column("gate")
        batch_op.drop_column("trial")
    with op.batch_alter_table("benchmark_runs") as batch_op:
        batch_op.drop_column("trials")
    with op.batch_alter_table("criteria") as batch_op:
        batch_op.drop_column("idle_ok")
        batch_op.drop_column("required")
