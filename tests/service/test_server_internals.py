"""The uvicorn internals `assay.service.server` hooks into (its httptools protocol class, its
supervisor's `Process`) are where and as the server expects them; where they have moved, `assay
serve` still serves, on uvicorn's stock protocol and supervisor, and says so in its log."""

from __future__ import annotations

import inspect
import textwrap
import uuid
from pathlib import Path

import httpx
import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors import multiprocess

from assay.service.server import unfit_internals

from .processes import serving


def test_the_uvicorn_internals_the_server_hooks_into_are_as_tested() -> None:
    assert unfit_internals() == {"protocol": [], "supervisor": []}, uvicorn.__version__
    # What the hooks read on instances, and the module-level name the supervisor starts (and
    # restarts) its workers through, which `run` swaps for the own-socket worker.
    process = multiprocess.Process(uvicorn.Config("assay.service.app:create_app", factory=True), [])
    try:
        assert process.server.started is False
        assert callable(process.process.is_alive) and process.process.pid is None
        assert process.child_conn is not None and process.parent_conn is not None
    finally:
        process.parent_conn.close()
        process.child_conn.close()
    assert "Process(self.config, self.sockets)" in inspect.getsource(multiprocess.Multiprocess)
    assert "self.pong()" in inspect.getsource(multiprocess.Process.always_pong)


def test_a_moved_internal_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def connection_made(self: HttpToolsProtocol, sock_transport: object) -> None: ...

    monkeypatch.setattr(HttpToolsProtocol, "connection_made", connection_made)
    monkeypatch.delattr(multiprocess.Process, "_healthcheck")
    assert unfit_internals() == {
        "protocol": ["HttpToolsProtocol.connection_made(transport)"],
        "supervisor": ["multiprocess.Process._healthcheck(timeout)"],
    }


MOVED_INTERNALS = textwrap.dedent(
    """
    # A uvicorn whose internals moved: the health check renamed, connection_made's parameter too.
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.supervisors import multiprocess

    stock = multiprocess.Process
    members = {k: v for k, v in vars(stock).items() if k not in {"_healthcheck", "__dict__", "__weakref__"}}
    members.update(
        __qualname__="Process",
        _health=lambda self, wait: stock._healthcheck(self, wait),
        ping=lambda self, timeout=5: self._health(timeout) is not None,
        is_ready=lambda self, timeout=5: self._health(timeout) is True,
    )
    multiprocess.Process = type("Process", (), members)

    made = HttpToolsProtocol.connection_made
    HttpToolsProtocol.connection_made = lambda self, sock_transport: made(self, sock_transport)
    """
)


def test_serve_runs_on_stock_uvicorn_when_its_internals_moved(tmp_path: Path) -> None:
    patches = tmp_path / "moved"
    patches.mkdir()
    (patches / "sitecustomize.py").write_text(MOVED_INTERNALS)  # imported first by every process
    key = "vk_moved_" + uuid.uuid4().hex
    env = {"PYTHONPATH": str(patches)}
    with serving(tmp_path / "data", database_url=None, key=key, workers=2, env=env) as served:
        with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
            for _ in range(4):  # connections to both workers, most likely
                created = api.post("/benchmarks", json={"name": "moved internals"})
                assert created.status_code == 201, created.text
                assert api.get(f"/benchmarks/{created.json()['id']}").status_code == 200
        log = served.output()
    assert "running uvicorn's own httptools protocol" in log, log
    assert "multiprocess.Process._healthcheck(timeout)" in log, log
    assert "running uvicorn's own supervisor" in log, log
