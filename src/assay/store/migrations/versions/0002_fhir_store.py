"""Embedded FHIR store: shared dataset layers, one store row per playground, version rows.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25 22:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fhir_layers",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("resource_count", sa.Integer(), nullable=False),
        sa.Column("loaded_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("hash"),
    )
    op.create_table(
        "fhir_layer_resources",
        sa.Column("layer_hash", sa.String(length=64), nullable=False),
        sa.Column("resource_type", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("layer_hash", "resource_type", "resource_id"),
    )
    op.create_table(
        "fhir_stores",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("layer_hash", sa.String(length=64), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("locked_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "fhir_versions",
        sa.Column("store_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("resource_type", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=64), nullable=False),
        sa.Column("version_id", sa.String(length=64), nullable=False),
        sa.Column("last_updated", sa.String(length=40), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("body", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("store_id", "seq"),
    )
    op.create_index(
        "ix_fhir_versions_resource", "fhir_versions", ["store_id", "resource_type", "resource_id", "seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_fhir_versions_resource", table_name="fhir_versions")
    op.drop_table("fhir_versions")
    op.drop_table("fhir_stores")
    op.drop_table("fhir_layer_resources")
    op.drop_table("fhir_layers")
