"""The app's shutdown closes what its start-up and requests opened."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from assay.sandboxes.fhir.external import ExternalBackend, configured_external_fhir
from assay.service.app import create_app
from assay.service.settings import Settings


def test_shutdown_closes_the_external_fhir_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The httpx client pooled per `ASSAY_FHIR_URL` was never closed: a server that stops (or a
    worker that restarts) left its connections to the external FHIR server open."""
    monkeypatch.setenv("ASSAY_FHIR_URL", "http://127.0.0.1:9/fhir")
    app = create_app(Settings(data_dir=tmp_path, mllp_port=0, sftp_port=0))

    async def serve_once() -> ExternalBackend:
        async with app.router.lifespan_context(app):  # start-up and shutdown, as uvicorn runs them
            external = configured_external_fhir()
            assert external is not None and not external.client.is_closed
            return external

    external = asyncio.run(serve_once())
    assert external.client.is_closed
    assert configured_external_fhir() is not external  # a later server gets a fresh one
