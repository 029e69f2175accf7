"""The phone line: where each voice turn came from, its call and kind; the calls themselves.

Turns stored before have no source (read as unknown: they match `source: any` only).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0016_voice_line", "0015_run_counters"  # written 2026-11-28
branch_labels = depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("voice_turns") as batch:
        batch.add_column(sa.Column("source", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("call_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("kind", sa.String(length=16), nullable=True))
    op.create_table(
        "voice_calls",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("number", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("end_reason", sa.String(length=64), nullable=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_voice_calls_sandbox_id", "voice_calls", ["sandbox_id"])


def downgrade() -> None:
    op.drop_index("ix_voice_calls_sandbox_id", table_name="voice_calls")
    op.drop_table("voice_calls")
    with op.batch_alter_table("voice_turns") as batch:
        batch.drop_column("kind")
        batch.drop_column("call_id")
        batch.drop_column("source")
