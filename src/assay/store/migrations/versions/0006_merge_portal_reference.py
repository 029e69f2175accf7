"""Merge point: the portal rows (0005_portal) and task reference solutions (0005_task_reference)
were written side by side; this joins the two heads so `upgrade head` has one target.

Revision ID: 0006_merge
Revises: 0005_portal, 0005_task_reference
Create Date: 2026-11-26 08:25:00
"""

from __future__ import annotations

revision = "0006_merge"
down_revision = ("0005_portal", "0005_task_reference")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
