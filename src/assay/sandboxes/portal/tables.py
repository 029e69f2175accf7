"""Tables of the portal sandbox: one store row per playground, one version row per write, sessions.

A playground's portal state is captured as a *pointer* (docs/snapshots.md): the playground id and the last
sequence number written, never a copy. Rows are kept as versions so a capture stays exact even if
a row changes after it (the surfaces refuse traffic once the task run ends, but `set_portal_row`,
REST and the web pages all write through the same append-only path anyway).

- `portal_stores`: one row per playground: the write lock (every write updates it first, which
  serializes writers on SQLite and PostgreSQL alike), the sequence and row counters, each
  resource's key, and the payer definitions the portal decides with. (`failed_logins` and
  `locked_until` are no longer written: wrong passwords are throttled per source and session in
  memory, `throttle.py`.)
- `portal_versions`: every write of a row as a full JSON body. `row_no` is the row's place in
  insertion order, the portal's recency order (docs/snapshots.md); a PATCH writes a new version, same
  `row_no`.
- `portal_sessions`: web portal sessions (the cookie holds a random id; the row, its hash).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from assay.store.models import Base, UtcDateTime

__all__ = ["PortalSessionRow", "PortalStoreRow", "PortalVersion"]

_ID = String(40)


class PortalStoreRow(Base):
    __tablename__ = "portal_stores"
    playground_id: Mapped[str] = mapped_column(_ID, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    rows: Mapped[int] = mapped_column(Integer, default=0)
    keys: Mapped[Any]
    """`{"<slug>/<resource>": key}`; the empty slug is the default portal."""
    payers: Mapped[Any]
    """`{"<slug>": payer definition}` (docs/sandboxes.md), from the playground's `x12` datasets."""
    failed_logins: Mapped[int] = mapped_column(Integer, default=0)
    locked_until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class PortalVersion(Base):
    __tablename__ = "portal_versions"
    __table_args__ = (Index("ix_portal_versions_key", "playground_id", "slug", "resource", "key_value"),)
    playground_id: Mapped[str] = mapped_column(_ID, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    row_no: Mapped[int] = mapped_column(Integer)
    slug: Mapped[str] = mapped_column(String(128))
    resource: Mapped[str] = mapped_column(String(128))
    key_value: Mapped[str | None] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)


class PortalSessionRow(Base):
    __tablename__ = "portal_sessions"
    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    playground_id: Mapped[str] = mapped_column(_ID, index=True)
    csrf: Mapped[str] = mapped_column(String(64))
    signed_in: Mapped[bool] = mapped_column(Boolean, default=False)
    slug: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
