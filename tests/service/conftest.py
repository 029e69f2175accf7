"""A real Assay server per backend (uvicorn in a thread, httpx's `serve_in_thread` pattern).

The suite runs against SQLite (always) and PostgreSQL (when `ASSAY_TEST_POSTGRES_URL` is set, as
`.ci/run` does): each session gets a fresh database, created here and dropped afterwards. Servers
are session-scoped; tests isolate themselves with unique names and their own benchmarks.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from assay.sandboxes import Deployment
from assay.service.app import create_app
from assay.service.auth.cache import TokenCache
from assay.service.server import NoDelayH11Protocol
from assay.service.settings import Settings
from assay.store import Database
from assay.store.tokens import ensure_org, mint_key

POSTGRES_URL = os.environ.get("ASSAY_TEST_POSTGRES_URL")
BOOTSTRAP_KEY = "vk_test_" + uuid.uuid4().hex


class _ThreadServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # signals belong to the test runner's main thread
        pass


@dataclass
class Server:
    url: str
    database: Database
    org_key: str
    backend: str
    tokens: TokenCache | None = None
    """The worker's run-token cache: clear it after editing a run's token row in SQL."""
    settings: Settings | None = None
    deployment: Deployment | None = None
    """What the app's lifespan opened (the FHIR surface's external-server client, …)."""

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.org_key}"} if token != "" else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def new_org_key(self, org_name: str | None = None) -> str:
        with self.database.transaction() as session:
            org = ensure_org(session, org_name or f"org-{uuid.uuid4().hex[:8]}")
            return mint_key(session, org.id).token


def _serve(settings: Settings) -> Iterator[tuple[str, Any]]:
    app = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _ThreadServer(uvicorn.Config(app, log_level="warning", lifespan="on", http=NoDelayH11Protocol))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def _fresh_postgres_database() -> Iterator[str]:
    if not POSTGRES_URL:
        pytest.skip("ASSAY_TEST_POSTGRES_URL is not set")
    admin_url = make_url(POSTGRES_URL)
    name = f"assay_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def _postgres_database() -> Iterator[str]:
    """One PostgreSQL database for the session's tests (and its in-process server)."""
    yield from _fresh_postgres_database()


@pytest.fixture
def _own_postgres_database() -> Iterator[str]:
    """A PostgreSQL database for one test alone: for checks over every row, which the session's
    other tests would otherwise feed (a benchmark without tasks completes with no task runs, a
    criterion added after a run completed)."""
    yield from _fresh_postgres_database()


@pytest.fixture(scope="session", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir: Path = tmp_path_factory.mktemp(f"assay-{request.param}")
    database_url = request.getfixturevalue("_postgres_database") if request.param == "postgres" else None
    settings = Settings(
        data_dir=data_dir,
        database_url=database_url,
        bootstrap_api_key=BOOTSTRAP_KEY,
        sweep_interval=0.2,
    ).with_free_ports()  # the surfaces' listeners bind free ports (tests never use fixed ones)
    for url, app in _serve(settings):
        yield Server(
            url,
            app.state.database,
            BOOTSTRAP_KEY,
            request.param,
            app.state.tokens,
            settings,
            app.state.deployment,
        )


@contextmanager
def serving(base: Server, **changes: Any) -> Iterator[Server]:
    """Another server on `base`'s database with its `Settings` changed (`rate_limit=…`, a surface's
    settings as `surface_settings={"fhir": {"lenient": True}}`, set over `base`'s): a test that
    needs other settings builds an app with them instead of changing the environment under the
    shared one. Without listeners (`base` runs them)."""
    assert base.settings is not None
    surfaces = changes.pop("surface_settings", {})
    settings = replace(base.settings, listeners=False, **changes).with_surface_settings(surfaces)
    for url, app in _serve(settings):
        yield Server(
            url,
            app.state.database,
            base.org_key,
            base.backend,
            app.state.tokens,
            settings,
            app.state.deployment,
        )


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def unique(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:8]}"


Json = dict[str, Any]
Factory = Callable[..., Json]
