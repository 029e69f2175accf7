"""Datasets keep the sha256 of their content, computed once when stored (for big datasets).

`start` used to serialise every dataset again to find its FHIR layer. Rows written before this
migration have NULL and are hashed at `start` (the same function), as before.

Revision ID: 0007_dataset_hash
Revises: 0006_merge
Create Date: 2026-11-26 10:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_dataset_hash"
down_revision = "0006_merge"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch_op:
        batch_op.add_column(sa.Column("content_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch_op:
        batch_op.drop_column("content_hash")
