"""FHIR layer rows compressed with lz4 on PostgreSQL (for big datasets).

The first `start` of a 1,024-patient set writes 165,516 `fhir_layer_resources` rows (~450 MB of
JSON text) by COPY while the next chunk is serialised; on PostgreSQL with 2 workers the writer
was the slower side, and the thread serialising waited ~1.75 s for it. The backend's pglz
compression of the bodies over ~2 KB was most of its work: the same 18,840 Synthea rows went
in by COPY in 343-360 ms with pglz, 216-230 ms with lz4, for the same stored size.
"""

from __future__ import annotations

from assay.store.toast import set_compression

revision, down_revision = "0011_layer_lz4", "0010_dataset_lz4"  # written 2026-11-27
branch_labels = depends_on = None

_COLUMNS = (("fhir_layer_resources", "body"),)


def upgrade() -> None:
    set_compression(_COLUMNS, "lz4")


def downgrade() -> None:
    set_compression(_COLUMNS, "default")
