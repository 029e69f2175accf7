"""Seeding a playground from its datasets (SPEC §5.1): environment's first, then the task's.

Each dataset type needs a loader into its sandbox store. Only `fhir` has one so far; a task run
whose datasets include another type cannot be provisioned faithfully, so `start` fails it with
the reason (SPEC §1.1: `dataset type voice is not supported`) instead of running on partial state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from assay.sandboxes.fhir.external import (
    SPACE_KEY,
    ExternalFhirFailed,
    IsolatedFhir,
    configured_external_fhir,
)
from assay.sandboxes.fhir.layers import seeded_resources
from assay.sandboxes.fhir.store import embedded_fhir
from assay.sandboxes.provision import close_space
from assay.store import iso, utcnow
from assay.store.models import Sandbox

__all__ = ["LOADED_TYPES", "seed", "unsupported_dataset"]

log = logging.getLogger("assay.sandboxes")

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
    With `ASSAY_FHIR_URL` set, the resources go to that server instead: into the playground's own
    space (`ASSAY_FHIR_ISOLATION` other than `tag`) or tagged and namespaced per playground.
    """
    bundles = [dataset.get("data") for dataset in datasets if dataset.get("type") == "fhir"]
    external = configured_external_fhir()
    if external is None:
        connection = session.connection()
        embedded_fhir(connection.engine).provision(playground_id, bundles, conn=connection)
        return
    resources = seeded_resources(bundles, iso(utcnow()) or "")
    try:
        if isinstance(external, IsolatedFhir):
            _seed_space(session, external, playground_id, resources)
        else:
            external.provision(playground_id, resources)
    except ExternalFhirFailed as exc:  # the API answers 500 without logging a DomainError
        log.warning("seeding playground %s on the external FHIR server failed: %s", playground_id, exc)
        raise


def _seed_space(
    session: Session, external: IsolatedFhir, playground_id: str, resources: Sequence[dict[str, Any]]
) -> None:
    """Open the playground's space, load it, and record it in the `fhir` sandbox row.

    Anything that fails once the space is open (the load, recording it) closes it again, and so
    does a start whose transaction rolls back after this (the task run stays `created`, so `start`
    can be retried): no space outlives a start that did not commit.
    """
    space = external.open(playground_id)
    recorded = external.record(space)
    engine = session.connection().engine
    try:
        external.load(space, resources)
        sandbox = session.scalars(
            select(Sandbox).where(Sandbox.playground_id == playground_id, Sandbox.type == "fhir")
        ).one()
        sandbox.credentials = {**(sandbox.credentials or {}), SPACE_KEY: recorded}
    except BaseException:
        close_space(engine, external, playground_id, recorded)
        raise
    event.listen(
        session, "after_rollback", lambda _: close_space(engine, external, playground_id, recorded), once=True
    )
