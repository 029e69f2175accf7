"""A real uvicorn server in a thread (httpx's `serve_in_thread` pattern) over a fresh SQLite store."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import Engine

from assay.sandboxes.fhir import EmbeddedFhir, SurfaceEvent
from assay.service.fhir_server import create_fhir_server
from assay.service.settings import Settings
from assay.store.database import Database

# The whole service (run lifecycle + surfaces), on SQLite and, with ASSAY_TEST_POSTGRES_URL, PostgreSQL.
from tests.service.conftest import BOOTSTRAP_KEY, _postgres_database, _serve, api, server  # noqa: F401


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


@pytest.fixture(scope="session")
def run_service(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The whole service (run tokens, `start`, the FHIR surface) on the same database as
    `fhir_server`; its URL."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("run-service"),
        database_url=engine.url.render_as_string(hide_password=False),
        bootstrap_api_key=BOOTSTRAP_KEY,
    ).with_free_ports()  # fmt: skip
    for url, _ in _serve(settings):
        yield url


def _started_run(service: str) -> tuple[str, str]:
    """A benchmark run of one task over an environment without datasets, started with its run
    token: (the FHIR base URL the agent is shown, the run token)."""
    with httpx.Client(
        base_url=service, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}, timeout=60
    ) as admin:
        name = uuid.uuid4().hex[:8]
        environment = admin.post("/environments", json={"name": f"env {name}", "dataset_ids": []})
        assert environment.status_code == 201, environment.text
        benchmark = admin.post(
            "/benchmarks", json={"name": f"fhir {name}", "environment_id": environment.json()["id"]}
        )
        assert benchmark.status_code == 201, benchmark.text
        task = admin.post("/tasks", json={"benchmark_id": benchmark.json()["id"], "name": "agent"})
        assert task.status_code == 201, task.text
        run = admin.post("/v1/benchmark-runs", json={"benchmark_id": benchmark.json()["id"]}).json()
    token = run["bearer_token"]
    [task_run] = run["task_runs"]
    started = httpx.post(
        service + task_run["start_url"], headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert started.status_code == 200, started.text
    return service + started.json()["endpoints"]["fhir"], token


@pytest.fixture(scope="module", params=["store", "run"])
def agent_fhir(request: pytest.FixtureRequest, fhir_server: FhirServer) -> Iterator[httpx.Client]:
    """An httpx client on a FHIR playground, reached two ways: a fresh `assay fhir-server` store
    and a started task run's surface with its run token (the agent's path); both on `engine`
    (SQLite, and PostgreSQL with ASSAY_TEST_POSTGRES_URL). One per module: tests that share it
    work on resources of their own."""
    headers = {"Content-Type": "application/fhir+json"}
    if request.param == "store":
        store_id = "pg_" + uuid.uuid4().hex[:20]
        fhir_server.fhir.provision(store_id)
        base = fhir_server.base(store_id)
    else:
        base, token = _started_run(request.getfixturevalue("run_service"))
        headers["Authorization"] = f"Bearer {token}"
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        yield client
