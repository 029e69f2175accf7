"""The interchange control number (ISA13) each X12 exchange used, to answer a reused one with a
TA1 note 025 (`sandboxes/x12/engine.py`). Exchanges stored before it have none: their numbers
are never duplicates.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0014_x12_interchange_control", "0013_benchmark_vocabulary"  # written 2026-11-28
branch_labels = depends_on = None


def upgrade() -> None:
    op.add_column("x12_exchanges", sa.Column("interchange_control", sa.String(length=9), nullable=True))


def downgrade() -> None:
    op.drop_column("x12_exchanges", "interchange_control")
