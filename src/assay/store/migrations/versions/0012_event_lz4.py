"""Sandbox event bodies compressed with lz4 on PostgreSQL (for the agent path).

Every agent request stores its request and response (a FHIR search answer is ~5.6 KB of JSON),
so the event log's writer makes PostgreSQL compress each body into TOAST storage, by default with
pglz. Re-inserting 9,454 real event rows took 605 ms with pglz, 258 ms with lz4, for the same
stored size. As 0010 and 0011: values written from now on, where the server has lz4.
"""

from __future__ import annotations

from assay.store.toast import set_compression

revision, down_revision = "0012_event_lz4", "0011_layer_lz4"  # written 2026-11-27
branch_labels = depends_on = None


def upgrade() -> None:
    set_compression([("sandbox_events", "request"), ("sandbox_events", "response")], "lz4")


def downgrade() -> None:
    set_compression([("sandbox_events", "request"), ("sandbox_events", "response")], "default")
