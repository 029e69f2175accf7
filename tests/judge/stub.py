"""A small OpenAI-compatible chat-completions server for tests: a real HTTP server on port 0.

`reply` decides each answer from the request body: a string is the message content of a normal
completion, a `(status, body)` pair is sent as is, and `HANG` holds the request until the server
stops (to provoke the client's timeout without sleeping in the test).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG = object()
Reply = Callable[[dict[str, Any]], Any]


@dataclass
class StubJudge:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def completion(content: str, model: str = "stub-judge-1") -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1764115200,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 321, "completion_tokens": 17, "total_tokens": 338},
    }


@contextmanager
def stub_judge(reply: Reply) -> Iterator[StubJudge]:
    release = threading.Event()
    stub = StubJudge("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append(body)
            stub.headers.append(dict(self.headers))
            answer = reply(body)
            if answer is HANG:
                release.wait(10)
                return
            status, payload = answer if isinstance(answer, tuple) else (200, completion(answer))
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
