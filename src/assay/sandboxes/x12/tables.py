"""Tables of the X12 clearinghouse: the payer a playground answers as, and its exchanges.

- `x12_payers`: one row per x12 sandbox, the payer definition its datasets loaded (docs/sandboxes.md),
  validated at seeding and never changed afterwards.
- `x12_exchanges`: one row per request the agent posted, with the reply it got, numbered by a
  per-sandbox `seq` (the recency order of docs/snapshots.md; also the reply's ISA13/GS06, so every reply
  has fresh control numbers), and the interchange control number the request used. A capture is `{"sandbox_id", "seq"}`: the rows at or below it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from assay.store.models import Base

__all__ = ["X12Exchange", "X12Payer"]

_ID = String(40)


class X12Payer(Base):
    __tablename__ = "x12_payers"
    sandbox_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("sandboxes.id", ondelete="CASCADE"), primary_key=True
    )
    definition: Mapped[Any]
    created_at: Mapped[datetime]


class X12Exchange(Base):
    __tablename__ = "x12_exchanges"
    sandbox_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("sandboxes.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(_ID, unique=True)
    org_id: Mapped[str] = mapped_column(_ID, index=True)
    endpoint: Mapped[str] = mapped_column(String(3))
    """`270`, `276` or `278`: where the request was posted."""
    kind: Mapped[str] = mapped_column(String(3))
    """What was answered: `271`, `277`, `278`, `999` or `TA1`."""
    request: Mapped[str] = mapped_column(Text)
    response: Mapped[str] = mapped_column(Text)
    received_at: Mapped[datetime]
    interchange_control: Mapped[str | None] = mapped_column(String(9), default=None)
    """ISA13 of the request's first interchange that passed the envelope checks: a later
    interchange of the run with this number is a duplicate (`engine.respond`'s `used`)."""
