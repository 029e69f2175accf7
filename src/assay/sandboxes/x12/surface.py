"""The X12 clearinghouse on the `Surface` seam (docs/sandboxes.md, docs/snapshots.md).

Dataset type `x12` is a payer definition (`sandboxes.payer`), checked key by key at create.
`seed` stores the playground's payer (its x12 datasets merged in order); `router` mounts
`x12/270`, `x12/276` and `x12/278`; `capture` is `{"sandbox_id", "seq"}` — the exchanges at or
below that number — and `read` turns it back into `x12_records` for the `x12-response` check and
the snapshot's `x12/` folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Select
from sqlalchemy.orm import Session

from assay.core.state import X12Record, x12_digests
from assay.sandboxes.payer import PayerDefinitionInvalid, parse_payer
from assay.sandboxes.surface import (
    LogSurface,
    ProvisionFailed,
    RecordsView,
    RunContext,
    SurfaceTarget,
)
from assay.sandboxes.x12.routes import x12_router
from assay.sandboxes.x12.store import last_seq, records, seed_payer
from assay.sandboxes.x12.tools import TOOLS
from assay.snapshot import SnapshotWriter
from assay.store.models import Sandbox

__all__ = ["X12Sandbox", "X12View", "check_x12_dataset"]


def check_x12_dataset(data: Any) -> dict[str, list[str]]:
    """The payer definition (docs/sandboxes.md), every key checked (`data.members.0.birth_date`)."""
    try:
        parse_payer(data)
    except PayerDefinitionInvalid as exc:
        return {".".join(filter(None, ("data", key))): messages for key, messages in exc.errors.items()}
    return {}


class X12View(RecordsView):
    """The exchanges; nothing is exchanged before the agent acts (an x12 dataset defines the
    payer), so a captured sandbox's baseline is empty and every exchange is the agent's."""

    records: list[X12Record]

    def x12_records(self) -> Sequence[X12Record]:
        return self.records

    def write(self, writer: SnapshotWriter, record: X12Record) -> None:
        writer.add_x12(record)

    def digests(self) -> dict[str, str]:
        return x12_digests(self.records)


class X12Sandbox(LogSurface):
    tools = TOOLS
    name = "x12"
    dataset_type = "x12"
    state_fields = frozenset({"x12_records"})
    view = X12View

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        return check_x12_dataset(data)

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        definitions = [dataset.get("data") for dataset in datasets]
        usable = [d for d in definitions if isinstance(d, dict)]
        try:
            seed_payer(run.session, sandbox.id, usable)
        except PayerDefinitionInvalid as exc:
            raise ProvisionFailed(f"the x12 datasets do not make a payer definition: {exc}") from None

    def router(self, target: SurfaceTarget) -> APIRouter:
        return x12_router(target)

    def last_seq(self, sandbox_id: str) -> Select[Any]:
        return last_seq(sandbox_id)

    def records_until(self, session: Session, sandbox_id: str, seq: int) -> Sequence[X12Record]:
        return records(session, sandbox_id, seq)
