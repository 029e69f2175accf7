"""Running the app under uvicorn (httptools and uvloop), with TCP_NODELAY on every connection.

uvicorn's pure-Python h11 parser and the stock asyncio loop cost a measurable share of every
request on the agent path (`docs/performance.md`); httptools (C parser) and uvloop are
dependencies, so `run` uses them. `NoDelayH11Protocol` stays for callers that want h11.

asyncio turns Nagle's algorithm off only for sockets it creates with `IPPROTO_TCP`; the sockets
uvicorn binds for `--workers N` (and sockets handed in by callers) have protocol 0, so responses
written in two parts (headers, body) waited for the client's delayed ACK: about 40 ms a request.

On SIGTERM uvicorn stops accepting and lets requests in flight finish, for at most
`GRACEFUL_SHUTDOWN` seconds (it waited without limit before), so a loaded server still exits within
10 s: the app's shutdown (sweeper, event log, engine) follows.

With `--workers N` the supervisor pings each worker and kills one that does not answer within
`WORKER_HEALTHCHECK` seconds while it starts (uvicorn's default, 5 s, killed workers still
importing the app on a busy machine, over and over), and within `worker_timeout` seconds
(`ASSAY_WORKER_TIMEOUT`, default `WORKER_TIMEOUT`) once it serves. A serving worker answers the
ping from its event loop, not from a thread of its own: a worker whose loop is wedged, or that is
frozen (SIGSTOP), stops answering, and is killed and replaced — its listening socket and the
connections on it closed, so its clients reconnect to the others — instead of holding them until
uvicorn's thread answered for it for ever (or the old 60 s check).

On Linux, `--workers N` gives each worker a listening socket of its own on the port
(`SO_REUSEPORT`), and the kernel spreads new connections over them. uvicorn shares one listening
socket between its workers, and whichever worker woke first accepted every connection that was
waiting: under 16 keep-alive agent connections, all 16 (or 15 and 1) went to one worker while the
other idled, and PostgreSQL's agent-path throughput swung by a third from run to run with how the
connections happened to fall (`docs/performance.md`, "The agent path under load"). The supervisor's own
socket only holds the port: bound, never listening, so no connection waits on it. The cost: a
worker that dies drops the connections queued on its socket and not yet accepted (the supervisor
starts another). Elsewhere the workers share uvicorn's socket as before.

The one-write transport and the per-worker sockets hook into uvicorn below its documented surface
(its httptools protocol class, its supervisor's `Process`). pyproject.toml bounds uvicorn to the
minor series these hooks are tested with, `tests/service/test_server_internals.py` fails when
what they hook into moves, and `run` checks the same shape at start-up (`unfit_internals`): where
it has moved, the server runs on uvicorn's stock protocol or supervisor and logs a warning, rather
than failing to start or misbehaving.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
import sys
import threading
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors import multiprocess

__all__ = [
    "GRACEFUL_SHUTDOWN",
    "JOIN_AT_MOST",
    "WORKER_HEALTHCHECK",
    "WORKER_TIMEOUT",
    "NoDelayH11Protocol",
    "NoDelayHttpToolsProtocol",
    "run",
    "unfit_internals",
]

GRACEFUL_SHUTDOWN = 5.0
WORKER_HEALTHCHECK = 60.0
"""Seconds a starting worker may take to answer the supervisor's ping (spawn, imports, migrations)."""
WORKER_TIMEOUT = 10.0
"""Seconds a serving worker's event loop may leave the ping unanswered before it is replaced: well
above a long garbage collection or a slow request on a loaded machine, well below what a client
waits for an answer (`ASSAY_WORKER_TIMEOUT`)."""


def _no_delay(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: asyncio.Transport, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _no_delay(transport)
        super().connection_made(transport, *args, **kwargs)


JOIN_AT_MOST = 256 * 1024
"""Bytes up to which a response's parts are joined into one write; a bigger body goes as it is."""


class _OneWritePerResponse:
    """A transport that hands what is written to the socket in one write per response.

    uvicorn writes a response's status line and headers, then its body, each straight to the
    socket: two `send` calls (uvloop makes them holding the GIL), two TCP segments, and the client
    woken for each. On the agent path, with answers of a few KiB, those writes were a fifth of a
    loaded worker's GIL time, most of it the first one. Here a write is kept until
    the response is complete (`flush`, from `NoDelayHttpToolsProtocol.on_response_complete`) or,
    for a response streamed over several steps, until the event loop's next turn (`call_soon`):
    a streamed part is never held longer than the step that wrote it."""

    __slots__ = ("_loop", "_next_turn", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._next_turn: asyncio.Handle | None = None
        """The flush due at the loop's next turn while something is pending; a flush cancels it."""

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._pending.append(data)
        if self._next_turn is None:
            self._next_turn = self._loop.call_soon(self.flush)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        if self._next_turn is not None:  # flushed now: the next turn has nothing to do
            self._next_turn.cancel()
            self._next_turn = None
        pending = self._pending
        if not pending:
            return
        self._pending = []
        if self._transport.is_closing():
            return
        if len(pending) == 1:
            self._transport.write(pending[0])
        elif sum(map(len, pending)) <= JOIN_AT_MOST:
            self._transport.write(b"".join(pending))
        else:  # a big body is not copied to save one system call: written as uvicorn wrote it
            for data in pending:
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # the rest is the socket transport's
        return getattr(self._transport, name)


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    """httptools, with TCP_NODELAY and one write per response (`_OneWritePerResponse`)."""

    def connection_made(self, transport: asyncio.Transport, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _no_delay(transport)
        one_write = _OneWritePerResponse(transport, asyncio.get_running_loop())
        super().connection_made(one_write, *args, **kwargs)  # type: ignore[arg-type]

    def on_response_complete(self) -> None:
        flush = getattr(self.transport, "flush", None)
        if flush is not None:
            flush()
        super().on_response_complete()


def run(
    app: Any,
    *,
    host: str,
    port: int,
    workers: int = 1,
    worker_timeout: float = WORKER_TIMEOUT,
    **options: Any,
) -> None:
    """`uvicorn.run` with the no-delay protocol; `app` is the app, or an import string for workers."""
    options.setdefault("timeout_graceful_shutdown", GRACEFUL_SHUTDOWN)
    options.setdefault("loop", "uvloop")
    unfit = unfit_internals()
    http: type[HttpToolsProtocol] | str = NoDelayHttpToolsProtocol
    if unfit["protocol"]:
        _warn_stock(unfit["protocol"], "uvicorn's own httptools protocol (one write per response is off)")
        http = "httptools"
    if workers > 1:
        # uvicorn kills a worker that does not answer its health ping within the timeout (5 s by
        # default); a worker still starting (spawn, imports, migrations) on a loaded machine took
        # longer and was killed and respawned in a loop, so the API never came up.
        options.setdefault("timeout_worker_healthcheck", WORKER_HEALTHCHECK)
        if _REUSE_PORT and unfit["supervisor"]:
            _warn_stock(
                unfit["supervisor"], "uvicorn's own supervisor (one shared socket, frozen workers kept)"
            )
        elif _REUSE_PORT:
            _OwnSocketProcess.serving_timeout = worker_timeout
            _run_workers_on_own_sockets(app, host=host, port=port, workers=workers, http=http, **options)
            return
        uvicorn.run(app, factory=True, host=host, port=port, workers=workers, http=http, **options)
    else:
        uvicorn.run(app, host=host, port=port, http=http, **options)


_PROTOCOL_HOOKS = {"connection_made": ("transport",), "on_response_complete": ()}
"""What `NoDelayHttpToolsProtocol` overrides on uvicorn's `HttpToolsProtocol`: method, parameters."""
_SUPERVISOR_HOOKS = {
    "__init__": ("config", "sockets"),
    "target": ("sockets",),
    "pong": (),
    "is_alive": ("timeout",),
    "_healthcheck": ("timeout",),
}
"""What `_OwnSocketProcess` overrides or calls on uvicorn's `multiprocess.Process`."""


def unfit_internals() -> dict[str, list[str]]:
    """The uvicorn internals this module hooks into that are missing or changed shape, for the
    one-write protocol (`protocol`) and the own-socket supervisor (`supervisor`): empty when all
    are as tested."""
    supervisor = _unfit("multiprocess.Process", getattr(multiprocess, "Process", None), _SUPERVISOR_HOOKS)
    supervisor += _unfit(
        "multiprocess.Multiprocess",
        getattr(multiprocess, "Multiprocess", None),
        {"__init__": ("config", "sockets"), "run": ()},
    )
    supervisor += _unfit("Server", uvicorn.Server, {"serve": ("sockets",)})
    return {
        "protocol": _unfit("HttpToolsProtocol", HttpToolsProtocol, _PROTOCOL_HOOKS),
        "supervisor": supervisor,
    }


def _unfit(where: str, cls: Any, hooks: dict[str, tuple[str, ...]]) -> list[str]:
    if not isinstance(cls, type):
        return [where]
    unfit = []
    for method, parameters in hooks.items():
        member = getattr(cls, method, None)
        found = None
        if callable(member):
            with contextlib.suppress(TypeError, ValueError):
                found = tuple(inspect.signature(member).parameters)[1 : 1 + len(parameters)]  # after self
        if found != parameters:
            unfit.append(f"{where}.{method}({', '.join(parameters)})")
    return unfit


def _warn_stock(unfit: list[str], instead: str) -> None:
    logging.getLogger("uvicorn.error").warning(
        "uvicorn %s does not have the internals this server was tested with (%s): running %s",
        uvicorn.__version__,
        ", ".join(unfit),
        instead,
    )


_REUSE_PORT = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")
"""Linux spreads connections over the listening sockets of a port; other systems do not promise to."""


def _port_socket(family: socket.AddressFamily, address: Any) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    sock.set_inheritable(True)
    return sock


class _OwnSocketProcess(multiprocess.Process):
    """A uvicorn worker that listens on a socket of its own, bound where the supervisor's is, and
    whose event loop answers the supervisor's ping once it serves (module docstring)."""

    serving_timeout = WORKER_TIMEOUT
    """Set by `run` in the supervisor, the only process that reads it."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        self._serving = False  # the supervisor's view: the worker said it has started
        self._loop: asyncio.AbstractEventLoop | None = None  # the worker's, once it serves
        super().__init__(config, sockets)

    def target(self, sockets: list[socket.socket] | None = None) -> None:  # in the worker
        own = []
        for shared in sockets or []:
            own.append(_port_socket(shared.family, shared.getsockname()))
            shared.close()  # this process's copy; the supervisor keeps the port
        serve = self.server.serve

        async def serve_on_this_loop(sockets: list[socket.socket] | None = None) -> None:
            self._loop = asyncio.get_running_loop()
            await serve(sockets)

        self.server.serve = serve_on_this_loop  # type: ignore[method-assign]
        super().target(own)

    def pong(self) -> None:  # in the worker, on uvicorn's pong thread
        self.child_conn.recv()
        started, loop = self.server.started, self._loop
        if started and loop is not None:
            answered = threading.Event()
            try:
                loop.call_soon_threadsafe(answered.set)
            except RuntimeError:  # the loop has closed: shutting down
                pass
            else:
                answered.wait()  # a wedged loop never answers: the supervisor kills this process
        self.child_conn.send(started)

    def is_alive(self, timeout: float = 5) -> bool:  # in the supervisor
        if not self.process.is_alive():
            return False
        started = self._healthcheck(self.serving_timeout if self._serving else timeout)
        if started is None:
            if self._serving:
                logging.getLogger("uvicorn.error").warning(
                    "Child process [%s] did not answer within %.0f s (frozen or wedged): replacing it",
                    self.pid,
                    self.serving_timeout,
                )
            return False
        self._serving = self._serving or started
        return True


def _run_workers_on_own_sockets(app: Any, *, host: str, port: int, workers: int, **options: Any) -> None:
    """`uvicorn.run`'s `--workers` path, with a port-holding socket (`SO_REUSEPORT`, not listening)
    in the supervisor and one listening socket per worker (`_OwnSocketProcess`)."""
    config = uvicorn.Config(app, factory=True, host=host, port=port, workers=workers, **options)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    held = _port_socket(family, (host, port))
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", host, held.getsockname()[1]
    )
    original = multiprocess.Process
    multiprocess.Process = _OwnSocketProcess  # type: ignore[misc]  # what Multiprocess starts and restarts
    try:
        multiprocess.Multiprocess(config, sockets=[held]).run()
    except KeyboardInterrupt:
        pass
    finally:
        multiprocess.Process = original  # type: ignore[misc]
        held.close()
