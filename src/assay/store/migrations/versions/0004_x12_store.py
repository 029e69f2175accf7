"""X12 clearinghouse: the payer per sandbox and the request/response exchanges.

Revision ID: 0004_x12
Revises: 0003
Create Date: 2026-11-26 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_x12"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "x12_payers",
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["sandbox_id"], ["sandboxes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("sandbox_id"),
    )
    op.create_table(
        "x12_exchanges",
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("endpoint", sa.String(length=3), nullable=False),
        sa.Column("kind", sa.String(length=3), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["sandbox_id"], ["sandboxes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("sandbox_id", "seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_x12_exchanges_org_id", "x12_exchanges", ["org_id"])


def downgrade() -> None:
    op.drop_index("ix_x12_exchanges_org_id", table_name="x12_exchanges")
    op.drop_table("x12_exchanges")
    op.drop_table("x12_payers")
