"""Seeding a playground from its datasets (SPEC §5.1): environment's first, then the task's.

Each dataset type needs a loader into its sandbox store. Only `fhir` has one so far; a task run
whose datasets include another type cannot be provisioned faithfully, so `start` fails it with
the reason (SPEC §1.1: `dataset type voice is not supported`) instead of running on partial state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from assay.sandboxes.fhir.external import configured_external_fhir
from assay.sandboxes.fhir.layers import seeded_resources
from assay.sandboxes.fhir.store import embedded_fhir
from assay.store import iso, utcnow

__all__ = ["LOADED_TYPES", "seed", "unsupported_dataset"]

LOADED_TYPES = frozenset({"fhir"})
"""Dataset types with a loader."""


def unsupported_dataset(datasets: Sequence[Mapping[str, Any]]) -> str | None:
    """The reason `start` must fail for these datasets, or None when all can be loaded."""
    for dataset in datasets:
        kind = dataset.get("type")
        if kind not in LOADED_TYPES:
            return f"dataset type {kind} is not supported"
    return None


def seed(session: Session, playground_id: str, datasets: Sequence[Mapping[str, Any]]) -> None:
    """Create the playground's stores inside the caller's transaction and load `datasets` in order.

    The FHIR store always exists (empty without `fhir` datasets): it is keyed by the playground id.
    With `ASSAY_FHIR_URL` set, the resources go to that server instead, namespaced per playground.
    """
    bundles = [dataset.get("data") for dataset in datasets if dataset.get("type") == "fhir"]
    external = configured_external_fhir()
    if external is not None:
        external.provision(playground_id, seeded_resources(bundles, iso(utcnow()) or ""))
        return
    connection = session.connection()
    embedded_fhir(connection.engine).provision(playground_id, bundles, conn=connection)
