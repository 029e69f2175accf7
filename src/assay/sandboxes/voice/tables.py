"""The voice sandbox's transcript: one row per turn, numbered per sandbox in arrival order.

Turns seeded by `voice` datasets and `add_voice_turns` are marked `seeded`; the agent's come
through `POST voice/turns`. A capture is `{"sandbox_id", "seq"}`: every turn at or below it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from assay.store.models import Base

__all__ = ["VoiceTurnRow"]


class VoiceTurnRow(Base):
    __tablename__ = "voice_turns"
    sandbox_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    speaker: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    start_ms: Mapped[int | None] = mapped_column(Integer)
    end_ms: Mapped[int | None] = mapped_column(Integer)
    seeded: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
