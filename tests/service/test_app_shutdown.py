"""The app's shutdown closes what its start-up and requests opened."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import Engine

from assay.core.memory import settled
from assay.sandboxes import SURFACES, Deployment
from assay.sandboxes.fhir.external import ExternalBackend, IsolatedFhir, TaggedFhir
from assay.sandboxes.fhir.surface import external_of
from assay.service.app import create_app
from assay.service.settings import Settings


def test_the_lifespan_owns_the_external_fhir_client(tmp_path: Path) -> None:
    """The httpx client of an `ASSAY_FHIR_URL` server was pooled per process and never closed: a
    server that stops (or a worker that restarts) left its connections open. Now each app's
    lifespan opens its own from `Settings` and closes it at shutdown; a second app in the same
    process (with other settings) has its own."""
    settings = (
        Settings(
            data_dir=tmp_path,
            listeners=False,
        )
        .with_free_ports()
        .with_surface_settings({"fhir": {"url": "http://127.0.0.1:9/fhir/"}})
    )
    first, embedded = create_app(settings), create_app(Settings(data_dir=tmp_path, listeners=False))

    async def serve_once() -> tuple[ExternalBackend | None, ExternalBackend | None]:
        async with first.router.lifespan_context(first), embedded.router.lifespan_context(embedded):
            external = external_of(first.state.deployment)
            assert external is not None and not external.client.is_closed
            return external, external_of(embedded.state.deployment)

    external, other = asyncio.run(serve_once())
    assert isinstance(external, TaggedFhir) and external.base_url == "http://127.0.0.1:9/fhir"
    assert external.client.is_closed and other is None


def test_the_fhir_settings_are_read_once_from_the_environment() -> None:
    """`ASSAY_FHIR_*` are the FHIR surface's settings section and reach it as its deployment
    options; a value that is not valid names its variable (`serve` exits 2 with it)."""
    settings = Settings.from_env(
        {
            "ASSAY_FHIR_URL": " http://fhir.test/fhir/ ",
            "ASSAY_FHIR_ISOLATION": "assay-store",
            "ASSAY_FHIR_LENIENT": "1",
        }
    )
    fhir = settings.surface_options["fhir"]
    assert fhir["lenient"] is True and fhir["strict"] is False
    deployment = Deployment(cast(Engine, None), options=settings.surface_options)
    SURFACES["fhir"].open(deployment)  # type: ignore[attr-defined]
    external = external_of(deployment)
    assert isinstance(external, IsolatedFhir) and external.base_url == "http://fhir.test/fhir"
    external.client.close()
    assert Settings.from_env({}).surface_options["fhir"]["url"] is None
    with pytest.raises(ValueError, match="ASSAY_FHIR_LENIENT must be 1 or 0"):
        Settings.from_env({"ASSAY_FHIR_LENIENT": "maybe"})
    with pytest.raises(ValueError, match="ASSAY_FHIR_ISOLATION must be one of"):
        Settings().with_surface_settings({"fhir": {"isolation": "per-tenant"}})


def test_a_serving_app_keeps_its_start_up_heap_out_of_full_collections(tmp_path: Path) -> None:
    """Every way the app is served (`assay serve`, each of its `--workers`, `assay demo`, an
    in-process server) runs its lifespan: once started, what start-up built is frozen, so a full
    collection does not rescan it while requests wait (core/memory.py); at shutdown it is released."""
    app = create_app(Settings(data_dir=tmp_path, listeners=False, sweep_interval=0))
    first = settled() == 0

    async def serve_once() -> tuple[int, bool]:
        async with app.router.lifespan_context(app):
            built = {id(o) for o in gc.get_objects()}
            return settled(), id(app.state.database.engine) in built

    serving, engine_scanned = asyncio.run(serve_once())
    assert serving >= 1 and settled() == serving - 1
    if first:  # the process's first server froze its heap, and released it when it stopped
        assert not engine_scanned and gc.get_freeze_count() == 0
