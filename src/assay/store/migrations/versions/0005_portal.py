"""Portal sandbox: a store row per playground, version rows, web sessions.

Revision ID: 0005_portal
Revises: 0004_x12
Create Date: 2026-11-26 06:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_portal"
down_revision = "0004_x12"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "portal_stores",
        sa.Column("playground_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("payers", sa.JSON(), nullable=False),
        sa.Column("failed_logins", sa.Integer(), nullable=False),
        sa.Column("locked_until", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("playground_id"),
    )
    op.create_table(
        "portal_versions",
        sa.Column("playground_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("row_no", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=128), nullable=False),
        sa.Column("resource", sa.String(length=128), nullable=False),
        sa.Column("key_value", sa.Text(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("playground_id", "seq"),
    )
    op.create_index(
        "ix_portal_versions_key", "portal_versions", ["playground_id", "slug", "resource", "key_value"]
    )
    op.create_table(
        "portal_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("playground_id", sa.String(length=40), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("signed_in", sa.Boolean(), nullable=False),
        sa.Column("slug", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id_hash"),
    )
    op.create_index("ix_portal_sessions_playground_id", "portal_sessions", ["playground_id"])


def downgrade() -> None:
    op.drop_index("ix_portal_sessions_playground_id", table_name="portal_sessions")
    op.drop_table("portal_sessions")
    op.drop_index("ix_portal_versions_key", table_name="portal_versions")
    op.drop_table("portal_versions")
    op.drop_table("portal_stores")
