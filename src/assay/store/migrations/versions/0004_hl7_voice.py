"""HL7v2 and voice sandboxes: messages, receiving facilities, voice turns.

Revision ID: 0004_hl7_voice
Revises: 0003
Create Date: 2026-11-26 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_hl7_voice"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hl7_messages",
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("direction", sa.String(length=8), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("control_id", sa.String(length=200), nullable=True),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("sandbox_id", "direction", "seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_table(
        "hl7_facilities",
        sa.Column("facility", sa.String(length=64), nullable=False),
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("task_run_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("playground_id", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("facility"),
    )
    op.create_index("ix_hl7_facilities_task_run_id", "hl7_facilities", ["task_run_id"])
    op.create_table(
        "voice_turns",
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("speaker", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("start_ms", sa.Integer(), nullable=True),
        sa.Column("end_ms", sa.Integer(), nullable=True),
        sa.Column("seeded", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("sandbox_id", "seq"),
    )


def downgrade() -> None:
    op.drop_table("voice_turns")
    op.drop_index("ix_hl7_facilities_task_run_id", table_name="hl7_facilities")
    op.drop_table("hl7_facilities")
    op.drop_table("hl7_messages")
