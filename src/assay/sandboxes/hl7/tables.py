"""Tables of the HL7v2 sandbox: messages per sandbox, and the receiving facilities MLLP routes by.

- `hl7_messages`: the playground's inbox (seeded by `hl7` datasets and `seed_hl7_inbox`) and the
  accepted (`AA`) outbound messages, each direction numbered by its own per-sandbox `seq` — the
  arrival order docs/snapshots.md calls recency. A capture is `{"sandbox_id", "seq"}`: every outbound
  message at or below that number (docs/snapshots.md), never a copy.
- `hl7_facilities`: `receiving_facility` (MSH-6.1) → the task run's sandbox, so the one MLLP
  listener of a deployment finds the playground a message is for in one primary-key read.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from assay.store.models import Base

__all__ = ["Hl7Facility", "Hl7MessageRow"]


class Hl7MessageRow(Base):
    __tablename__ = "hl7_messages"
    sandbox_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    direction: Mapped[str] = mapped_column(String(8), primary_key=True)
    """`inbox` or `outbound`."""
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(String(40), unique=True)
    message: Mapped[str] = mapped_column(Text)
    control_id: Mapped[str | None] = mapped_column(String(200))
    received_at: Mapped[datetime]


class Hl7Facility(Base):
    __tablename__ = "hl7_facilities"
    facility: Mapped[str] = mapped_column(String(64), primary_key=True)
    sandbox_id: Mapped[str] = mapped_column(String(40))
    task_run_id: Mapped[str] = mapped_column(String(40), index=True)
    org_id: Mapped[str] = mapped_column(String(40))
    playground_id: Mapped[str] = mapped_column(String(40))
