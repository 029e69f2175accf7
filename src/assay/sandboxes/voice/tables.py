"""The voice sandbox's transcript and its phone-line calls.

`voice_turns`: one row per turn, numbered per sandbox in arrival order. Turns seeded by `voice`
datasets and `add_voice_turns` are `source: seeded`; turns posted to `voice/turns` are `reported`;
the phone line writes `line` turns (both sides of a call it answered) with their `call_id`. A
capture is `{"sandbox_id", "seq"}`: every turn at or below it.

`voice_calls`: one row per call placed on the line; `state` is the call's dialogue state (IVR
node, collected inputs, the representative's verification, the virtual clock), rewritten under
the row's lock by each action.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from assay.store.models import Base

__all__ = ["VoiceCallRow", "VoiceTurnRow"]


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
    source: Mapped[str | None] = mapped_column(String(16))
    call_id: Mapped[str | None] = mapped_column(String(40))
    kind: Mapped[str | None] = mapped_column(String(16))


class VoiceCallRow(Base):
    __tablename__ = "voice_calls"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    sandbox_id: Mapped[str] = mapped_column(String(40), index=True)
    direction: Mapped[str] = mapped_column(String(16))
    number: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    """`active` or `ended`."""
    end_reason: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[Any]
    created_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
