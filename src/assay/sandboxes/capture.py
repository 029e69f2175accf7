"""Captured state (docs/snapshots.md): a pointer stored on the task run, read back as a `SandboxState`.

`complete` stores the capture and scores it; `rescore` and `GET /task-runs/{id}/state` read the
same capture, so all three agree. The pointer carries the input entity and the entities criteria
are scoped to (frozen with the task run) and, under each surface's name, what that surface's
`capture` returned — where its final state is, never a copy (e.g. FHIR `{"store_id", "seq"}`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from assay.core.state import FileRecord, Hl7Record, PortalRow, SearchParams, VoiceTurn, X12Record
from assay.sandboxes.gate import lock_playground
from assay.sandboxes.registry import FIELD_OWNERS, SURFACES
from assay.sandboxes.surface import Deployment, StateView, deployment_of
from assay.snapshot import SnapshotWriter
from assay.store import iso, utcnow

__all__ = ["CAPTURE_FORMAT", "CapturedState", "capture", "materialize", "state_of"]

CAPTURE_FORMAT = 1


def capture(
    playground_id: str | None,
    *,
    task_run_id: str,
    input_entity: Mapping[str, Any] | None,
    entities: Mapping[str, Any],
    session: Session | None = None,
    deployment: Deployment | None = None,
) -> dict[str, Any]:
    """Pin the playground's final state; the returned pointer is JSON, stored on the task run."""
    pointer: dict[str, Any] = {
        "format": CAPTURE_FORMAT,
        "kind": "embedded",
        "playground_id": playground_id,
        "task_run_id": task_run_id,
        "captured_at": iso(utcnow()),
        "input_entity": dict(input_entity) if input_entity is not None else None,
        "entities": dict(entities),
    }
    if session is None or playground_id is None:
        return pointer
    deployment = deployment or deployment_of(session.connection().engine)
    # The write gate's other side (`sandboxes/gate.py`): the sandbox rows are locked by a statement
    # of their own before anything is read, so every write that was admitted has committed and
    # PostgreSQL's next statement sees it; later writes wait and find the rows torn down. The rows
    # stay referenced while the surfaces capture: they read them from the session's (weak)
    # identity map, with no SQL.
    live = [(SURFACES[s.type], s) for s in lock_playground(session, playground_id) if s.type in SURFACES]
    reads = _read_all([surface.capture_read(sandbox.id, playground_id) for surface, sandbox in live], session)
    for (surface, sandbox), read in zip(live, reads, strict=True):
        where = surface.capture(session, sandbox.id, playground_id, deployment, read)
        if where is not None:
            pointer[surface.name] = where
    return pointer


def _read_all(queries: list[Select[Any] | None], session: Session) -> list[Any]:
    """Each query's value (None for a None query or no row), all in one statement: each query a
    scalar subquery of one SELECT, its locks taken as PostgreSQL evaluates it, left to right. It
    runs after `lock_playground`: a scalar subquery reads the statement's snapshot even when one of
    them waited for a lock, so the wait for writes in flight is the statement before this one."""
    asked = [(i, query) for i, query in enumerate(queries) if query is not None]
    values: list[Any] = [None] * len(queries)
    if asked:
        columns = [query.scalar_subquery().label(f"read_{i}") for i, query in asked]
        row = session.execute(select(*columns)).one()
        for (i, _), value in zip(asked, row, strict=True):
            values[i] = value
    return values


class CapturedState:
    """The `SandboxState` of a capture: each field read from the surface that owns it, plus the
    frozen entities. A field no live surface owns is an empty store (docs/snapshots.md).

    A surface's view is read the first time a criterion asks for one of its fields: a task's
    criteria read one or two surfaces, and reading all six for every `complete` was a third of
    its SQL (`complete` under agent load, `docs/performance.md`, "The agent path under load")."""

    def __init__(self, pointer: Mapping[str, Any], session: Session | None = None):
        self.pointer = pointer
        self._session = session
        self._views: dict[str, StateView] = {}

    def view(self, surface: str) -> StateView | None:
        """The surface's view of its part of the capture, read once; None for no such surface."""
        found = self._views.get(surface)
        if found is None and surface in SURFACES:
            found = self._views[surface] = SURFACES[surface].read(self.pointer.get(surface), self._session)
        return found

    def _ask(self, field: str, empty: Any, *args: Any) -> Any:
        """`field` answered by the view of the surface that owns it; `empty` when none does."""
        owner = FIELD_OWNERS.get(field)
        view = None if owner is None else self.view(owner)
        return empty if view is None else getattr(view, field)(*args)

    def input_entity(self) -> Mapping[str, Any] | None:
        entity = self.pointer.get("input_entity")
        return entity if isinstance(entity, dict) else None

    def entity(self, entity_id: str) -> Mapping[str, Any] | None:
        found = (self.pointer.get("entities") or {}).get(entity_id)
        return found if isinstance(found, dict) else None

    def fhir_search(self, resource_type: str, params: SearchParams) -> list[dict[str, Any]]:
        return self._ask("fhir_search", [], resource_type, params)  # type: ignore[no-any-return]

    def hl7_outbound(self) -> Sequence[Hl7Record]:
        return self._ask("hl7_outbound", ())  # type: ignore[no-any-return]

    def portal_rows(self, resource: str, portal: str | None = None) -> Sequence[PortalRow]:
        return self._ask("portal_rows", (), resource, portal)  # type: ignore[no-any-return]

    def files(self) -> Sequence[FileRecord]:
        return self._ask("files", ())  # type: ignore[no-any-return]

    def read_file(self, path: str) -> bytes:
        if "read_file" not in FIELD_OWNERS:
            raise FileNotFoundError(path)
        return self._ask("read_file", b"", path)  # type: ignore[no-any-return]

    def voice_turns(self) -> Sequence[VoiceTurn]:
        return self._ask("voice_turns", ())  # type: ignore[no-any-return]

    def x12_records(self) -> Sequence[X12Record]:
        return self._ask("x12_records", ())  # type: ignore[no-any-return]

    def baseline(self, surface: str) -> Mapping[str, str] | None:
        """The surface view's seeded digests (`no-unexpected-changes`); None when it has none."""
        found = getattr(self.view(surface), "baseline", None)
        return None if found is None else found()  # type: ignore[no-any-return]

    def digests(self, surface: str) -> Mapping[str, str]:
        found = getattr(self.view(surface), "digests", None)
        return {} if found is None else found()  # type: ignore[no-any-return]


def _views(pointer: Mapping[str, Any], session: Session | None) -> dict[str, StateView]:
    """Each live surface's view of its part of the pointer (an absent part reads as empty)."""
    return {name: surface.read(pointer.get(name), session) for name, surface in SURFACES.items()}


def state_of(pointer: Mapping[str, Any], session: Session | None = None) -> CapturedState:
    """The capture as a `SandboxState`; reading the embedded stores needs the caller's session."""
    return CapturedState(pointer, session)


def materialize(pointer: Mapping[str, Any], root: Path, session: Session | None = None) -> Path:
    """Write the capture as a snapshot directory (for `GET /task-runs/{id}/state`)."""
    manifest = {
        "task_run_id": pointer.get("task_run_id"),
        "captured_at": pointer.get("captured_at"),
        "input_entity": pointer.get("input_entity"),
        "entities": pointer.get("entities") or {},
    }
    writer = SnapshotWriter(root, manifest)
    for name, view in _views(pointer, session).items():
        SURFACES[name].snapshot(view, writer)
    return writer.close()
