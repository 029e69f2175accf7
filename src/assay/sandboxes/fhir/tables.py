"""Tables of the embedded FHIR store: shared dataset layers and per-playground version rows.

A playground's FHIR state is a *pointer* (docs/snapshots.md): the dataset layer it was seeded from plus the
versions written since, each numbered by a per-store sequence. Nothing is copied per playground,
so provisioning and `complete` stay fast however large the datasets are.

- `fhir_layers` / `fhir_layer_resources`: the result of loading an ordered list of `fhir` datasets
  (docs/sandboxes.md), stored once per content hash and shared by every playground seeded with it.
- `fhir_stores`: one row per playground store: its layer and the last sequence number written. The
  row is also the write lock: every write transaction updates it first, which serializes writers
  of one store on SQLite and PostgreSQL alike.
- `fhir_versions`: every write (create, update, patch, delete) as a full version row.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from assay.store.models import Base

__all__ = ["FhirLayer", "FhirLayerResource", "FhirStoreRow", "FhirVersion"]

_KEY = String(64)


class FhirLayer(Base):
    __tablename__ = "fhir_layers"
    hash: Mapped[str] = mapped_column(_KEY, primary_key=True)
    resource_count: Mapped[int] = mapped_column(Integer)
    loaded_at: Mapped[datetime]


class FhirLayerResource(Base):
    __tablename__ = "fhir_layer_resources"
    layer_hash: Mapped[str] = mapped_column(_KEY, primary_key=True)
    resource_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    resource_id: Mapped[str] = mapped_column(_KEY, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    body: Mapped[str] = mapped_column(Text)


class FhirStoreRow(Base):
    __tablename__ = "fhir_stores"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    layer_hash: Mapped[str | None] = mapped_column(_KEY)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    locked_at: Mapped[datetime | None]
    created_at: Mapped[datetime]


class FhirVersion(Base):
    __tablename__ = "fhir_versions"
    __table_args__ = (Index("ix_fhir_versions_resource", "store_id", "resource_type", "resource_id", "seq"),)
    store_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    resource_type: Mapped[str] = mapped_column(String(64))
    resource_id: Mapped[str] = mapped_column(_KEY)
    version_id: Mapped[str] = mapped_column(String(64))
    last_updated: Mapped[str] = mapped_column(String(40))
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    body: Mapped[str | None] = mapped_column(Text)
