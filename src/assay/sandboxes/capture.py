"""Captured state (SPEC §6): a pointer stored on the task run, read back as a `SandboxState`.

`complete` stores the capture and scores it; `rescore` and `GET /task-runs/{id}/state` read the
same capture, so all three agree. The pointer carries the input entity and the entities criteria
are scoped to (frozen with the task run) and, per embedded store, where its final state is: for
FHIR `{"store_id", "seq"}` — the playground's store as of that sequence number, the dataset layer
plus the changes since loading, never a copy (SPEC §6). With `ASSAY_FHIR_URL` the playground's state
lives on that server, so it is copied once into an embedded layer: `{"store_id", "seq": 0,
"external": <server URL>}` (the URL says where it came from; it is never shown to agents).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from assay.core.state import FileRecord, Hl7Record, PortalRow, SearchParams, VoiceTurn, X12Record
from assay.formats.fhir import FhirStore
from assay.sandboxes.fhir.external import ExternalFhirFailed, configured_external_fhir
from assay.sandboxes.fhir.layers import LayerNotLoadable
from assay.sandboxes.fhir.store import embedded_fhir
from assay.snapshot import write_snapshot
from assay.store import iso, utcnow

__all__ = ["CAPTURE_FORMAT", "CapturedState", "capture", "materialize", "state_of"]

CAPTURE_FORMAT = 1

log = logging.getLogger("assay.sandboxes")


def capture(
    playground_id: str | None,
    *,
    task_run_id: str,
    input_entity: Mapping[str, Any] | None,
    entities: Mapping[str, Any],
    session: Session | None = None,
) -> dict[str, Any]:
    """Pin the playground's final state; the returned pointer is JSON, stored on the task run."""
    pointer = {
        "format": CAPTURE_FORMAT,
        "kind": "embedded",
        "playground_id": playground_id,
        "task_run_id": task_run_id,
        "captured_at": iso(utcnow()),
        "input_entity": dict(input_entity) if input_entity is not None else None,
        "entities": dict(entities),
    }
    if session is not None and playground_id is not None:
        connection = session.connection()
        fhir = embedded_fhir(connection.engine)
        external = configured_external_fhir()
        seq = fhir.capture_if_present(playground_id, connection)
        if seq is None and external is not None:
            # An external server's state is copied once, as an embedded layer: scoring, rescore
            # and the state tar.gz never depend on that server again.
            # Every resource is read before anything is written: a server error on any type raises
            # `ExternalFhirFailed` and the whole `complete` rolls back (the task run stays started).
            try:
                resources = external.snapshot(playground_id, connection)
            except ExternalFhirFailed as exc:  # the API answers 500 without logging a DomainError
                log.warning("capture of playground %s failed: %s", playground_id, exc)
                raise
            bundle = {"resourceType": "Bundle", "type": "collection", "entry": [
                {"resource": resource} for resource in resources
            ]}  # fmt: skip
            try:
                fhir.provision(playground_id, [bundle], conn=connection)
            except LayerNotLoadable as exc:
                # The server held a resource the embedded store cannot (an id over 64 characters,
                # one that names no snapshot file): the same clean failure as a server error.
                raise ExternalFhirFailed(
                    f"the external FHIR server's state cannot be captured: {exc}"
                ) from None
            pointer["fhir"] = {"store_id": playground_id, "seq": 0, "external": external.base_url}
        elif seq is not None:
            pointer["fhir"] = {"store_id": playground_id, "seq": seq}
    return pointer


def _fhir_at(pointer: Mapping[str, Any], session: Session | None) -> FhirStore:
    where = pointer.get("fhir")
    if session is None or not isinstance(where, dict):
        return FhirStore(())
    connection = session.connection()
    return embedded_fhir(connection.engine).state_at(str(where["store_id"]), int(where["seq"]), connection)


class CapturedState:
    """The `SandboxState` of a capture: the FHIR store as captured, plus the frozen entities."""

    def __init__(self, pointer: Mapping[str, Any], fhir: FhirStore | None = None):
        self.pointer = pointer
        self._fhir = fhir if fhir is not None else FhirStore(())

    def input_entity(self) -> Mapping[str, Any] | None:
        entity = self.pointer.get("input_entity")
        return entity if isinstance(entity, dict) else None

    def entity(self, entity_id: str) -> Mapping[str, Any] | None:
        found = (self.pointer.get("entities") or {}).get(entity_id)
        return found if isinstance(found, dict) else None

    def fhir_search(self, resource_type: str, params: SearchParams) -> list[dict[str, Any]]:
        return self._fhir.search(resource_type, params)

    def hl7_outbound(self) -> Sequence[Hl7Record]:
        return ()

    def portal_rows(self, resource: str, portal: str | None = None) -> Sequence[PortalRow]:
        return ()

    def files(self) -> Sequence[FileRecord]:
        return ()

    def read_file(self, path: str) -> bytes:
        raise FileNotFoundError(path)

    def voice_turns(self) -> Sequence[VoiceTurn]:
        return ()

    def x12_records(self) -> Sequence[X12Record]:
        return ()


def state_of(pointer: Mapping[str, Any], session: Session | None = None) -> CapturedState:
    """The capture as a `SandboxState`; reading the embedded stores needs the caller's session."""
    return CapturedState(pointer, _fhir_at(pointer, session))


def materialize(pointer: Mapping[str, Any], root: Path, session: Session | None = None) -> Path:
    """Write the capture as a SPEC §6 snapshot directory (for `GET /task-runs/{id}/state`)."""
    manifest = {
        "task_run_id": pointer.get("task_run_id"),
        "captured_at": pointer.get("captured_at"),
        "input_entity": pointer.get("input_entity"),
        "entities": pointer.get("entities") or {},
    }
    fhir = _fhir_at(pointer, session)
    resources = [resource for kind in fhir.types() for resource in fhir.resources(kind)]
    return write_snapshot(root, manifest=manifest, fhir=resources)
