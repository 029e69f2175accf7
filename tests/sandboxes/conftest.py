"""A real uvicorn server in a thread (httpx's `serve_in_thread` pattern) over a fresh SQLite store."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import Engine

from assay.sandboxes.fhir import EmbeddedFhir, SurfaceEvent
from assay.service.fhir_server import create_fhir_server
from assay.store.database import Database

# The whole service (run lifecycle + surfaces), on SQLite and, with ASSAY_TEST_POSTGRES_URL, PostgreSQL.
from tests.service.conftest import _postgres_database, api, server  # noqa: F401


@dataclass
class FhirServer:
    url: str
    fhir: EmbeddedFhir
    events: list[SurfaceEvent] = field(default_factory=list)

    def base(self, store_id: str) -> str:
        return f"{self.url}/stores/{store_id}/fhir"


def make_app(fhir: EmbeddedFhir, events: list[SurfaceEvent], token: str = "") -> FastAPI:
    """The standalone Assay FHIR server (`assay fhir-server`) over `fhir`, recording to `events`."""
    return create_fhir_server(fhir=fhir, record=events.append, token=token)


T = TypeVar("T")


def at_once(count: int, work: Callable[[int], T]) -> list[T]:
    """`work(0)` … `work(count - 1)`, each in its own thread, all released together by a barrier
    (racing writers); their results in `n` order."""
    barrier = threading.Barrier(count)
    results: dict[int, T] = {}

    def run(n: int) -> None:
        barrier.wait()
        results[n] = work(n)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [results[n] for n in range(count)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(app: FastAPI) -> Iterator[str]:
    """Run `app` under uvicorn on a free port in a thread; yields its base URL."""
    port = free_port()
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uvicorn_server.run, daemon=True)
    thread.start()
    while not uvicorn_server.started:
        if not thread.is_alive():  # e.g. another process took the port after `free_port` freed it
            raise RuntimeError(f"uvicorn did not start on 127.0.0.1:{port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uvicorn_server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The service's engine on SQLite and, with ASSAY_TEST_POSTGRES_URL, on PostgreSQL."""
    if request.param == "postgres":
        database = Database(request.getfixturevalue("_postgres_database"))
        database.migrate()
    else:
        database = Database(f"sqlite:///{tmp_path_factory.mktemp('fhir') / 'assay.db'}")
        database.migrate()
    yield database.engine
    database.dispose()


@pytest.fixture(scope="session")
def fhir_server(engine: Engine) -> Iterator[FhirServer]:
    """One server for the session; each test provisions its own store (`new_store`)."""
    fhir = EmbeddedFhir(engine)
    events: list[SurfaceEvent] = []
    for url in serve(make_app(fhir, events)):
        yield FhirServer(url, fhir, events)


@pytest.fixture
def new_store(fhir_server: FhirServer) -> str:
    """A fresh, empty store on the shared server; its FHIR base URL."""
    store_id = "pg_" + uuid.uuid4().hex[:20]
    fhir_server.fhir.provision(store_id)
    return fhir_server.base(store_id)
