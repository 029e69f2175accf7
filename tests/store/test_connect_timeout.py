"""A PostgreSQL host that accepts a connection and then says nothing (packets dropped, a hung
server) holds a new connection only for `CONNECT_WAIT`, and the failure reads as an outage (503),
not a hang of the kernel's TCP timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from assay.store import database as database_module
from assay.store.database import Database
from assay.store.faults import DATABASE, outage


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A listener on loopback that accepts connections and never answers them."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()


def test_a_silent_database_host_is_an_outage_within_the_connect_wait(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "CONNECT_WAIT", 1)
    database = Database(f"postgresql+psycopg://assay@127.0.0.1:{silent_server}/assay")
    began = time.monotonic()
    try:
        with pytest.raises(Exception) as failed, database.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        assert time.monotonic() - began < 10
        assert outage(failed.value) == DATABASE
    finally:
        database.dispose()
