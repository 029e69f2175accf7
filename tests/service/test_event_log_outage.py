"""The event log through a database outage: events queued while PostgreSQL cannot be reached are
kept and stored once it is back; when the queue is full during the outage, the events that find no
room are counted and the sandbox's event list says how many are missing (an `events_missing`
event) — never a silent gap.

The outage is real: the writer's engine reaches PostgreSQL through a TCP proxy in this test, which
is closed (every connection cut, new ones refused) and opened again. The shared PostgreSQL server
itself is never touched."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.engine import make_url

from assay.sandboxes import events
from assay.sandboxes.events import MISSING, events_lost, events_pending, flush_events, record_event
from assay.store import Database
from assay.store.errors import Unavailable

from .builders import make_benchmark, ok, org_id_of, start_run
from .conftest import Server


class Proxy:
    """A TCP forwarder to `upstream` on a port of its own, which can be cut (`down`) and restored (`up`)."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)


@pytest.fixture
def proxied(server: Server) -> Iterator[tuple[Database, Proxy]]:
    if server.backend != "postgres":
        pytest.skip("the outage is a PostgreSQL connection cut")
    url = server.database.url
    proxy = Proxy((url.host or "127.0.0.1", url.port or 5432))
    proxy.up()
    database = Database(make_url(url).set(host="127.0.0.1", port=proxy.port))
    try:
        yield database, proxy
    finally:
        if proxy._listener is None:
            proxy.up()
        with contextlib.suppress(Exception):
            events.close_event_logs(database.engine, timeout=10)
        database.dispose()
        proxy.down()


def test_events_queued_during_an_outage_are_stored_and_the_ones_dropped_are_marked(
    server: Server, api: httpx.Client, proxied: tuple[Database, Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    database, proxy = proxied
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    with server.client(run.token) as agent:
        playground_id = ok(agent.post(run.task_runs[0]["start_url"]))["playground_id"]
    [sandbox] = [
        box for box in ok(api.get(f"/playgrounds/{playground_id}"))["sandboxes"] if box["type"] == "fhir"
    ]
    org_id = org_id_of(server, server.org_key)

    def record(n: int) -> str:
        return record_event(
            database.engine, org_id=org_id, sandbox_id=sandbox["id"], type="fhir_request",
            method="GET", path=f"/outage/{n}", status=200,
        )  # fmt: skip

    kept = [record(0)]
    flush_events(database.engine)  # the pool holds a live connection through the proxy
    proxy.down()
    kept += [record(n) for n in range(1, 4)]
    with pytest.raises(Unavailable):
        flush_events(database.engine, timeout=10)
    assert events_pending(database.engine)  # kept, not dropped
    lost_before = events_lost()
    monkeypatch.setattr(events, "MAX_QUEUED", 3)  # the queue is full from here on
    dropped = [record(n) for n in range(4, 9)]
    assert events_lost() - lost_before == len(dropped)
    health = ok(api.get("/healthz"))  # the in-process server: this process's count
    assert health["status"] == "degraded" and health["events_lost"] >= len(dropped), health
    proxy.up()
    flush_events(database.engine, timeout=30)
    assert not events_pending(database.engine)

    listed = ok(api.get(f"/sandboxes/{sandbox['id']}/events", params={"limit": 100}))["data"]
    ours = [
        event
        for event in listed
        if (event.get("path") or "").startswith("/outage/") or event["type"] == MISSING
    ]
    assert [event["id"] for event in ours if event["type"] != MISSING] == kept
    assert not set(dropped) & {event["id"] for event in listed}
    [missing] = [event for event in ours if event["type"] == MISSING]
    assert missing["response"] == {"missing": len(dropped)}
    seqs = [event["seq"] for event in listed]
    assert seqs == list(range(1, len(listed) + 1))  # no gap, no repeat
