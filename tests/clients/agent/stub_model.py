"""A scripted OpenAI-compatible chat server (a real HTTP server on a free port, in a thread).

`script(messages, tools) -> message` answers each `POST /v1/chat/completions`; a returned
`{"sleep": seconds}` makes the server hold the answer that long first (a model that times out).
Every request body is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


@contextmanager
def stub_model(script: Script) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            requests.append(body)
            if self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            message = script(body["messages"], body.get("tools") or [])
            if "sleep" in message:
                time.sleep(message.pop("sleep"))
            answer = {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}
                ],
            }
            data = json.dumps(answer).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up waiting
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
