"""The demo agent's HTTP client retries a `503` with `Retry-After` (the database restarting), a
bounded number of times, against a real HTTP server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from assay.clients.demo.agent import RetryUnavailable


class _Outage(BaseHTTPRequestHandler):
    unavailable = 2
    """Requests answered 503 before the server answers 201."""
    seen: list[bytes] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append(body)
        if len(type(self).seen) <= type(self).unavailable:
            self.send_response(503)
            self.send_header("Retry-After", "0")
        else:
            self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def outage() -> Iterator[str]:
    _Outage.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Outage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_503_with_retry_after_is_sent_again_with_its_body(outage: str) -> None:
    with httpx.Client(base_url=outage, transport=RetryUnavailable()) as client:
        assert client.post("/x", content=b"note").status_code == 201
    assert _Outage.seen == [b"note"] * 3


def test_retries_are_bounded(outage: str) -> None:
    _Outage.unavailable = 100
    try:
        with httpx.Client(base_url=outage, transport=RetryUnavailable(attempts=2)) as client:
            assert client.post("/x", content=b"note").status_code == 503
        assert len(_Outage.seen) == 3
    finally:
        _Outage.unavailable = 2
