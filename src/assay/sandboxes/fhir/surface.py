"""The FHIR sandbox on the `Surface` seam (docs/sandboxes.md, docs/snapshots.md).

Embedded by default: `EmbeddedFhir` keyed by the playground id. With `ASSAY_FHIR_URL` the REST
surface forwards to that server (`external/`), seeding goes there, and `complete` copies the
playground's final state back into an embedded layer, so scoring never needs the server again.
Its settings section is `options` (`ASSAY_FHIR_URL`, `_ISOLATION`, `_AUTHORIZATION`, `_LENIENT`,
`_STRICT`), handed over by the deployment; the forwarder and its HTTP client are opened by the app's lifespan (`open`) and closed at its shutdown (`close`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy import Engine, Select, delete, event, select, update
from sqlalchemy.orm import Session

from assay.core.state import SearchParams, resource_digest
from assay.formats.fhir import FhirStore
from assay.sandboxes.fhir.external import (
    ISOLATIONS,
    SPACE_KEY,
    ExternalBackend,
    ExternalFhirFailed,
    ExternalFhirSettings,
    IsolatedFhir,
    TaggedFhir,
    open_external_fhir,
    recorded_space,
)
from assay.sandboxes.fhir.layers import LayerNotLoadable, LayerSource, layer_key, seeded_resources
from assay.sandboxes.fhir.openapi import FHIR_SCHEMAS
from assay.sandboxes.fhir.routes import FhirSurface, SurfaceEvent, base_url_of, fhir_router, serve_cached
from assay.sandboxes.fhir.store import capture_read, embedded_fhir
from assay.sandboxes.fhir.tables import FhirStoreRow, FhirVersion
from assay.sandboxes.fhir.tools import TOOLS
from assay.sandboxes.fhir.validation import strict_available
from assay.sandboxes.fhir.viewer import judged_events
from assay.sandboxes.options import Option
from assay.sandboxes.read_ahead import contents
from assay.sandboxes.surface import (
    BaseSurface,
    Deployment,
    ProvisionFailed,
    Purge,
    RunContext,
    SandboxHandle,
    StateView,
    SurfaceTarget,
)
from assay.sandboxes.viewer import ChatLine, PreviewEvent
from assay.snapshot import SnapshotWriter
from assay.store import iso, utcnow
from assay.store.json_values import content_hash
from assay.store.models import Sandbox

__all__ = ["FhirSandbox", "FhirView", "check_fhir_dataset", "close_space", "external_of", "seed_space"]

log = logging.getLogger("assay.sandboxes")


def check_fhir_dataset(data: Any) -> dict[str, list[str]]:
    """A Bundle of any type but `searchset` and `*-response`, each entry a resource (docs/sandboxes.md)."""
    if not isinstance(data, dict) or data.get("resourceType") != "Bundle":
        return {"data.resourceType": ["a fhir dataset is a Bundle"]}
    kind = data.get("type")
    if kind == "searchset" or (isinstance(kind, str) and kind.endswith("-response")):
        return {"data.type": [f"a Bundle of type {kind} cannot be loaded"]}
    entries = data.get("entry", [])
    if not isinstance(entries, list):
        return {"data.entry": ["must be an array"]}
    errors: dict[str, list[str]] = {}
    for i, entry in enumerate(entries):
        resource = entry.get("resource") if isinstance(entry, dict) else None
        request = entry.get("request") if isinstance(entry, dict) else None
        if isinstance(request, dict) and request.get("method") == "DELETE":
            continue
        if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
            errors[f"data.entry.{i}.resource"] = ["must be a FHIR resource with resourceType"]
    return errors


def _strict_setting(settings: Mapping[str, Any]) -> Any:
    """`settings.fhir.strict_validation`: writes are validated unless it is `false`."""
    fhir = settings.get("fhir")
    return fhir.get("strict_validation", True) if isinstance(fhir, dict) else True


_EXTERNAL = "fhir.external"
"""The key of the deployment's forwarder in `Deployment.runtime`."""


def external_of(deployment: Deployment) -> ExternalBackend | None:
    """The deployment's external FHIR server (`ASSAY_FHIR_URL`), opened by its lifespan, or None."""
    found = deployment.runtime.get(_EXTERNAL)
    return found if isinstance(found, TaggedFhir | IsolatedFhir) else None


def _one_of_isolations(value: str) -> str | None:
    return None if value in ISOLATIONS else f"must be one of {', '.join(ISOLATIONS)}"


def _lenient(deployment: Deployment) -> bool:
    """`ASSAY_FHIR_LENIENT=1`: every playground's writes get the structural checks only."""
    return bool(deployment.option("fhir", "lenient", False))


def _surface(request: Request, handle: SandboxHandle) -> FhirSurface:
    """The FHIR surface a run-token request reaches: its playground's store, recording to its sandbox."""

    def record(event: SurfaceEvent) -> None:
        handle.record(
            "fhir_request",
            method=event.method,
            path=event.path,
            status=event.status,
            request=event.request,
            response=event.response,
            response_json=event.response_json,
        )

    fhir = embedded_fhir(handle.deployment.engine)
    return FhirSurface(
        fhir, handle.playground_id, base_url_of(request), record, external_of(handle.deployment)
    )


class FhirView(StateView):
    """The captured FHIR store, searched the way the REST surface searches."""

    def __init__(self, store: FhirStore, seeded: Sequence[dict[str, Any]] | None = None):
        self.store = store
        self.seeded = seeded
        """The dataset layer's resources; None when unknown (state copied from an external server)."""

    def baseline(self) -> dict[str, str] | None:
        if self.seeded is None:
            return None
        return {f"{r['resourceType']}/{r['id']}": resource_digest(r) for r in self.seeded}

    def digests(self) -> dict[str, str]:
        return {
            f"{kind}/{resource['id']}": resource_digest(resource)
            for kind in self.store.types()
            for resource in self.store.resources(kind)
        }

    def fhir_search(self, resource_type: str, params: SearchParams) -> list[dict[str, Any]]:
        return self.store.search(resource_type, params)


class FhirSandbox(BaseSurface):
    tools = TOOLS
    name = "fhir"
    dataset_type = "fhir"
    dataset_files = ".fhir.json"  # a FHIR Bundle as is
    state_fields = frozenset({"fhir_search"})
    openapi_schemas = FHIR_SCHEMAS
    options = MappingProxyType(
        {  # ASSAY_FHIR_*: docs/deployment.md
            "url": str,  # an external FHIR R4 server to forward to; unset: the embedded store
            "isolation": Option(str, "tag", check=_one_of_isolations),
            "authorization": str,  # the `Authorization` header sent to that server
            "lenient": Option(bool, False),  # agent writes get the structural checks only
            "strict": Option(bool, False),  # a start without validation still needs fhir.resources
        }
    )

    def open(self, deployment: Deployment) -> None:
        url = str(deployment.option("fhir", "url") or "").strip().rstrip("/")
        if url:
            configured = ExternalFhirSettings(
                url, deployment.option("fhir", "isolation", "tag"), deployment.option("fhir", "authorization")
            )
            deployment.runtime[_EXTERNAL] = open_external_fhir(configured)

    def close(self, deployment: Deployment) -> None:
        external = deployment.runtime.pop(_EXTERNAL, None)
        if isinstance(external, TaggedFhir | IsolatedFhir):
            external.client.close()

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        return check_fhir_dataset(data)

    def chat_lines(self, event: PreviewEvent) -> Sequence[ChatLine]:
        return ()

    def judged_events(self, evidence: Mapping[str, Any], events: Sequence[PreviewEvent]) -> Iterable[str]:
        return judged_events(evidence, events)

    def check_settings(self, settings: Mapping[str, Any], deployment: Deployment) -> str | None:
        strict = _strict_setting(settings)
        if not isinstance(strict, bool):
            return f"settings.fhir.strict_validation must be true or false, got {strict!r}"
        server_strict = bool(deployment.option("fhir", "strict", False))
        if (strict or server_strict) and not _lenient(deployment) and not strict_available():
            return (
                "settings.fhir.strict_validation needs the fhir.resources package, which is not "
                "installed (install assay[strict])"
            )
        return None

    def provision(self, run: RunContext) -> dict[str, Any] | None:
        """The row keeps whether its REST surface validates writes (`store.STRICT_KEY`), decided
        once here: the environment's `strict_validation: false` or `ASSAY_FHIR_LENIENT=1` relax."""
        return {
            "strict_validation": _strict_setting(run.settings) is not False and not _lenient(run.deployment)
        }

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        """The store always exists (empty without `fhir` datasets), keyed by the playground id.
        With `ASSAY_FHIR_URL` the resources go to that server instead: into the playground's own
        space (`ASSAY_FHIR_ISOLATION` other than `tag`) or tagged and namespaced per playground."""
        external = external_of(run.deployment)
        session, playground_id = run.session, run.playground_id
        if external is None:
            connection = session.connection()
            try:
                embedded_fhir(connection.engine).provision(
                    playground_id, layer_source(datasets), conn=connection
                )
            except LayerNotLoadable as unloadable:  # raised before any row is loaded
                raise ProvisionFailed(str(unloadable)) from None
            return
        bundles = [dataset.get("data") for dataset in datasets]
        resources = seeded_resources(bundles, iso(utcnow()) or "")
        try:
            if isinstance(external, IsolatedFhir):
                seed_space(session, external, playground_id, resources)
            else:
                external.provision(playground_id, resources)
        except ExternalFhirFailed as exc:  # the API answers 500 without logging a DomainError
            log.warning("seeding playground %s on the external FHIR server failed: %s", playground_id, exc)
            raise

    def prepare(self, datasets: Sequence[Mapping[str, Any]], deployment: Deployment) -> None:
        """Build and store the embedded store's dataset layer before `start`'s transaction (it
        then finds it): the decoding and loading hold no database lock."""
        if external_of(deployment) is not None:
            return
        source = layer_source(datasets)
        if not isinstance(source, LayerSource):
            return
        try:
            embedded_fhir(deployment.engine).layers.build(source)
        except LayerNotLoadable:
            return  # `seed` meets it again inside the transaction and fails the start with it

    def router(self, target: SurfaceTarget) -> APIRouter:
        # `= Depends(...)`, not `Annotated[...]`: under postponed annotations FastAPI resolves
        # annotation strings in the module's globals, where the local `target` is not. `async`:
        # it does no I/O, so it runs on the event loop instead of taking a worker thread.
        async def surface(request: Request, handle: SandboxHandle = Depends(target)) -> FhirSurface:
            return _surface(request, handle)

        return fhir_router(surface)

    def serve_cached(self, request: Request, handle: SandboxHandle, relative: str) -> Response | None:
        return serve_cached(request, _surface(request, handle), relative)

    def catch_up(self, handle: SandboxHandle) -> None:
        """The playground store's index, as `serve_cached`'s `CatchUp` would bring it."""
        if external_of(handle.deployment) is None:
            embedded_fhir(handle.deployment.engine).catch_up(handle.playground_id)

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any]:
        return capture_read(playground_id)

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        """Embedded: `{"store_id", "seq"}`, one locked read of the store row, never a copy.

        External: every resource is read before anything is written (a server error on any type
        raises `ExternalFhirFailed` and the whole `complete` rolls back, the task run still started),
        then stored once as an embedded layer: `{"store_id", "seq": 0, "external": <URL>}`.
        """
        if read is not None:
            return {"store_id": playground_id, "seq": int(read)}
        connection = session.connection()
        fhir = embedded_fhir(connection.engine)
        external = external_of(deployment)
        if external is None:
            return None
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
            raise ExternalFhirFailed(f"the external FHIR server's state cannot be captured: {exc}") from None
        return {"store_id": playground_id, "seq": 0, "external": external.base_url}

    def read(self, pointer: Any, session: Session | None) -> FhirView:
        if session is None or not isinstance(pointer, dict):
            return FhirView(FhirStore(()))
        connection = session.connection()
        fhir = embedded_fhir(connection.engine)
        store = fhir.state_at(str(pointer["store_id"]), int(pointer["seq"]), connection)
        # An external server's state is captured as the layer itself: its seeding is not known.
        seeded = None if "external" in pointer else fhir.seeded(str(pointer["store_id"]), connection)
        return FhirView(store, seeded)

    def snapshot(self, view: StateView, writer: SnapshotWriter) -> None:
        if isinstance(view, FhirView):
            writer.add_fhir(
                resource for kind in view.store.types() for resource in view.store.resources(kind)
            )
            baseline = view.baseline()
            if baseline is not None:
                writer.add_baseline(self.name, baseline)

    def teardown(self, session: Session, playground_id: str, deployment: Deployment) -> None:
        """Forget the worker's index; with an isolated backend, delete the playground's space once
        the transaction has committed — after the capture, which `complete` stored in the same
        transaction; a rolled-back `complete` leaves the space as it was."""
        embedded_fhir(session.connection().engine).forget(playground_id)
        external = external_of(deployment)
        if isinstance(external, IsolatedFhir):
            _close_after_commit(session, external, playground_id)

    def purge(self, gone: Purge) -> None:
        """A playground's embedded store is named by its id; the dataset layers stay, shared by
        content hash. (An external server's space was closed when the playground was torn down.)"""
        gone.session.execute(delete(FhirStoreRow).where(FhirStoreRow.id.in_(gone.playground_ids)))
        gone.session.execute(delete(FhirVersion).where(FhirVersion.store_id.in_(gone.playground_ids)))


def layer_source(datasets: Sequence[Mapping[str, Any]]) -> LayerSource | tuple[()]:
    """The layer `datasets` seed, keyed by their stored content hashes (a dataset stored without
    one is hashed here); their `data` is read only if the layer must be built, and rewritten in
    place then (`start` reads it for this start alone)."""
    if not datasets:
        return ()
    hashes = [dataset.get("hash") or content_hash(dataset.get("data")) for dataset in datasets]
    return LayerSource(layer_key(hashes), lambda: contents(datasets), owned=True)


def seed_space(
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


def _close_after_commit(session: Session, external: IsolatedFhir, playground_id: str) -> None:
    connection = session.connection()
    recorded = recorded_space(connection, playground_id)
    if recorded is None:
        return
    if (recorded.get("isolation"), recorded.get("server")) != (external.spaces.isolation, external.base_url):
        log.warning(
            "playground %s has a space on %s (%s), not on the configured FHIR server: left in place",
            playground_id, recorded.get("server"), recorded.get("isolation"),
        )  # fmt: skip
        return
    engine = connection.engine
    event.listen(
        session, "after_commit", lambda _: close_space(engine, external, playground_id, recorded), once=True
    )


def close_space(
    engine: Engine, external: IsolatedFhir, playground_id: str, recorded: Mapping[str, Any]
) -> None:
    """Delete a playground's space on the external server; never raises.

    A failure must not fail the `complete` (or cancel, or timeout) that ended the task run — its
    result is committed by now — so it is logged, and kept as `close_error` beside the space in
    the `fhir` sandbox row, where an operator can find spaces left on the server.
    """
    try:
        external.close(playground_id, recorded)
    except Exception as exc:
        log.warning("could not delete the FHIR space of playground %s: %s", playground_id, exc)
        _note_close_error(engine, playground_id, recorded, str(exc)[:1000])


def _note_close_error(engine: Engine, playground_id: str, recorded: Mapping[str, Any], error: str) -> None:
    try:
        with engine.begin() as conn:
            row = conn.execute(
                select(Sandbox.id, Sandbox.credentials).where(
                    Sandbox.playground_id == playground_id, Sandbox.type == "fhir"
                )
            ).first()
            if row is None:
                return
            credentials = {**(row.credentials or {}), SPACE_KEY: {**recorded, "close_error": error}}
            conn.execute(update(Sandbox).where(Sandbox.id == row.id).values(credentials=credentials))
    except Exception:
        log.exception("could not record the failed deletion of playground %s's FHIR space", playground_id)
