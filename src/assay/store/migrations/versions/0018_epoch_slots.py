"""The change epoch's slots on PostgreSQL: `assay_change_epoch_0` … `_255` (`store/epoch.py`).

A write scoped to a task run moves its key's slot instead of the global `assay_change_epoch`, so
one agent's write leaves the other agents' cached rows and FHIR indexes current. `CACHE 1`, as the
global one: each `nextval` is seen by every other session at once.

Revision ID: 0018_epoch_slots
Revises: 0017_trajectory
Create Date: 2026-11-28 05:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0018_epoch_slots"
down_revision = "0017_trajectory"
branch_labels = None
depends_on = None

SLOTS = 256  # store.epoch.SLOTS when written: a migration keeps its own copy


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for slot in range(SLOTS):
            op.execute(f"CREATE SEQUENCE IF NOT EXISTS assay_change_epoch_{slot} CACHE 1 NO CYCLE")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for slot in range(SLOTS):
            op.execute(f"DROP SEQUENCE IF EXISTS assay_change_epoch_{slot}")
