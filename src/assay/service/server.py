"""Running the app under uvicorn (httptools and uvloop), with TCP_NODELAY on every connection.

uvicorn's pure-Python h11 parser and the stock asyncio loop cost a measurable share of every
request on the agent path (issue 9, `docs/performance.md`); httptools (C parser) and uvloop are
dependencies, so `run` uses them. `NoDelayH11Protocol` stays for callers that want h11.

asyncio turns Nagle's algorithm off only for sockets it creates with `IPPROTO_TCP`; the sockets
uvicorn binds for `--workers N` (and sockets handed in by callers) have protocol 0, so responses
written in two parts (headers, body) waited for the client's delayed ACK: about 40 ms a request.

On SIGTERM uvicorn stops accepting and lets requests in flight finish, for at most
`GRACEFUL_SHUTDOWN` seconds (it waited without limit before), so a loaded server still exits within
10 s: the app's shutdown (sweeper, event log, engine) follows.

With `--workers N` the supervisor pings each worker and kills one that does not answer within
`WORKER_HEALTHCHECK` seconds (uvicorn's default, 5 s, killed workers still importing the app on a
busy machine, over and over, and a worker in a long garbage collection mid-transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["GRACEFUL_SHUTDOWN", "WORKER_HEALTHCHECK", "NoDelayH11Protocol", "NoDelayHttpToolsProtocol", "run"]

GRACEFUL_SHUTDOWN = 5.0
WORKER_HEALTHCHECK = 60.0


def _no_delay(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: asyncio.Transport, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _no_delay(transport)
        super().connection_made(transport, *args, **kwargs)


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _no_delay(transport)
        super().connection_made(transport, *args, **kwargs)


def run(app: Any, *, host: str, port: int, workers: int = 1, **options: Any) -> None:
    """`uvicorn.run` with the no-delay protocol; `app` is the app, or an import string for workers."""
    options.setdefault("timeout_graceful_shutdown", GRACEFUL_SHUTDOWN)
    options.setdefault("loop", "uvloop")
    if workers > 1:
        # uvicorn kills a worker that does not answer its health ping within the timeout (5 s by
        # default); a worker still starting (spawn, imports, migrations) on a loaded machine took
        # longer and was killed and respawned in a loop, so the API never came up.
        options.setdefault("timeout_worker_healthcheck", WORKER_HEALTHCHECK)
        uvicorn.run(
            app, factory=True, host=host, port=port, workers=workers, http=NoDelayHttpToolsProtocol, **options
        )
    else:
        uvicorn.run(app, host=host, port=port, http=NoDelayHttpToolsProtocol, **options)
