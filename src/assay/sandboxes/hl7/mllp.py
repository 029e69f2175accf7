"""The MLLP listener (docs/sandboxes.md, docs/deployment.md): one asyncio TCP server per deployment, default
port 2575.

MLLP frames a message as `0x0B <message> 0x1C 0x0D`. `MllpFramer` turns a byte stream into
frames, tolerating what real senders and hostile peers do: several messages per connection,
frames split across reads (or several per read), junk between frames (skipped), a start byte
inside an open frame (the unfinished frame is dropped and the new one read), and frames over
the 1 MB limit (read to their end keeping only their first MiB, then answered `AR` in their own
header's terms; the connection stays). Its work is linear in the bytes received: each byte is
scanned once.

Each message is routed by MSH-6.1 to the started task run whose credentials hold that
`receiving_facility`; an unknown facility or an ended task run gets `AR`. The route (facility →
sandbox) never changes, so it is cached; whether the run still takes traffic is read with every
message, in the transaction that stores it and its `hl7_outbound` event — one commit, then the
ACK, so an `AA` always names a stored message with its event. A routed refusal (`AE`, `AR`, a
frame over 1 MB) is logged as well, so the run's evidence shows it. The database work runs in a
thread so one slow write never stalls other connections. Limits count time, not silence: a
connection idle for `idle_timeout` seconds is closed, and so is one whose frame (from its first
byte, junk before a start byte included) is not complete `frame_timeout` seconds later, however
steadily its bytes drip; one source address holds at most `max_per_source` connections at once (a
further one is closed on accept). Nothing a peer sends can stop the listener: every failure is
that message's `AR`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from dataclasses import dataclass

from assay.sandboxes.events import write_event
from assay.sandboxes.hl7.ack import (
    INTERNAL_ERROR,
    MAX_MESSAGE_BYTES,
    Ack,
    Inspection,
    acknowledge,
    inspect,
    too_large,
)
from assay.sandboxes.hl7.store import Route, deliver, route, unroutable
from assay.sandboxes.surface import Deployment
from assay.store.driver import DriverTransaction
from assay.store.faults import no_space, outage

__all__ = ["END", "START", "Frame", "MllpFramer", "MllpListener", "frame"]

log = logging.getLogger("assay.sandboxes.hl7")

START = b"\x0b"
END = b"\x1c\x0d"
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_FRAME_TIMEOUT = 60.0
"""Seconds a frame may take from its first byte to its end (1 MB at 20 KB/s)."""
DEFAULT_MAX_PER_SOURCE = 64
"""Connections one source address may hold at once (0: no cap)."""
MAX_CONNECTIONS = 1000
"""Connections served at once (one thread each)."""
DB_SLOTS = 4
"""Messages in a database transaction at once, over all connections."""
STOP_WAIT = 5.0
"""Seconds `stop` waits for connections to finish the message in hand."""
MAX_ROUTES = 10_000
"""Receiving facilities whose route the listener keeps (each a few hundred bytes)."""


def frame(message: bytes) -> bytes:
    return START + message + END


def _join(threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


@dataclass(frozen=True, slots=True)
class Frame:
    payload: bytes
    """The message; of a frame over the limit, its first `max_bytes` only."""
    oversize: int = 0
    """The size of a frame over the limit (only its start was kept), else 0."""


def _transient(exc: Exception) -> str | None:
    """The `AE` text for a failure that passes (the database down or restarting, a full disk),
    which says to send the message again; None for any other failure (an `AR`)."""
    if no_space(exc):
        return "no space left to store the message: temporary error, retry later"
    dependency = outage(exc)
    if dependency is not None:
        return f"the {dependency} is unavailable: temporary error, retry later"
    return None


class MllpFramer:
    """Incremental MLLP deframing; `feed` returns the frames completed by `data`."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES):
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._open = False
        self._scanned = 0
        self._dropped = 0
        self._head = b""
        """The first `max_bytes` of an open frame past the limit (its header routes the refusal)."""

    @property
    def pending(self) -> bool:
        """Whether a frame is open (its start byte read, its end not yet)."""
        return self._open

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while True:
            if not self._open:
                start = self._buffer.find(START)
                if start < 0:
                    self._buffer.clear()  # junk between frames
                    return frames
                del self._buffer[: start + 1]
                self._open, self._scanned, self._dropped, self._head = True, 0, 0, b""
            end = self._buffer.find(END, max(self._scanned - 1, 0))
            restart = self._buffer.find(START, self._scanned, end if end >= 0 else len(self._buffer))
            if restart >= 0:  # a new frame began before this one ended: drop the unfinished one
                del self._buffer[: restart + 1]
                self._scanned, self._dropped, self._head = 0, 0, b""
                continue
            if end < 0:
                self._scanned = len(self._buffer)
                self._spill()
                return frames
            size = self._dropped + end
            if size > self.max_bytes:
                frames.append(Frame(self._head or bytes(self._buffer[: self.max_bytes]), size))
            else:
                frames.append(Frame(bytes(self._buffer[:end])))
            del self._buffer[: end + len(END)]
            self._open, self._head = False, b""

    def _spill(self) -> None:
        """Past the limit, keep the frame's first `max_bytes` aside and, of the rest, only the
        last byte (it may be half of the end marker)."""
        if self._dropped + len(self._buffer) > self.max_bytes and len(self._buffer) > 1:
            if not self._dropped:
                self._head = bytes(self._buffer[: self.max_bytes])
            self._dropped += len(self._buffer) - 1
            del self._buffer[:-1]
            self._scanned = 1


class MllpListener:
    """The deployment's MLLP server; `start` returns the bound port.

    The event loop only accepts connections. Each connection then has a thread of its own that
    owns its socket: it reads, deframes, checks, stores and answers each message itself, so a
    message costs one thread wake-up (the socket's) rather than three (loop, worker, loop) — on
    a busy 2-core machine each wake-up waits its turn for a core (docs/performance.md, "MLLP").
    At most `MAX_CONNECTIONS` connections are served at once (a further one is closed at once),
    and at most `DB_SLOTS` of them are in a transaction at a time, so MLLP traffic never holds
    more than that many of the pool's connections.
    """

    def __init__(
        self,
        deployment: Deployment,
        port: int,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        *,
        frame_timeout: float = DEFAULT_FRAME_TIMEOUT,
        max_per_source: int = DEFAULT_MAX_PER_SOURCE,
    ):
        self.deployment = deployment
        self.port = port
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout
        self.max_per_source = max_per_source
        self._per_source: dict[str, int] = {}
        self._sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()
        self._closing = False
        self._db_slots = threading.BoundedSemaphore(DB_SLOTS)
        self._routes: dict[str, Route] = {}
        """Receiving facility → its sandbox (`store.Route`: never changes once written)."""

    async def start(self) -> int:
        self._closing = False
        port = self.port
        for family, kind, proto, _, address in socket.getaddrinfo(
            self.deployment.host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            listening = socket.socket(family, kind, proto)
            try:
                listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                listening.bind((address[0], port, *address[2:]))
                listening.listen(128)
                listening.setblocking(False)
            except OSError:
                listening.close()
                await self.stop()
                raise
            self._sockets.append(listening)
            port = port or int(listening.getsockname()[1])  # every address on the one port
        self._accepting = [asyncio.create_task(self._accept(listening)) for listening in self._sockets]
        return int(self._sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop accepting; let each connection finish the message it is handling (stored and
        answered), then close it. Waits up to `STOP_WAIT` seconds for their threads."""
        self._closing = True
        for task in self._accepting:
            task.cancel()
        for task in self._accepting:
            with contextlib.suppress(BaseException):
                await task
        for listening in self._sockets:
            listening.close()
        self._accepting, self._sockets = [], []
        with self._lock:
            connections = dict(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RD)  # wakes a thread waiting to read; it can still answer
        await asyncio.to_thread(_join, list(connections.values()), STOP_WAIT)
        for connection in connections:  # a thread stuck sending to a peer that does not read
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, peer = await loop.sock_accept(listening)
            except asyncio.CancelledError:
                raise
            except OSError:  # e.g. out of file descriptors: keep listening
                log.exception("MLLP accept failed")
                await asyncio.sleep(0.1)
                continue
            source = str(peer[0])
            with self._lock:
                full = len(self._connections) >= MAX_CONNECTIONS
                crowded = 0 < self.max_per_source <= self._per_source.get(source, 0)
                if not (full or crowded):
                    thread = threading.Thread(
                        target=self._serve, args=(connection, source), name="assay-mllp", daemon=True
                    )
                    self._connections[connection] = thread
                    self._per_source[source] = self._per_source.get(source, 0) + 1
            if full or crowded:
                if full:
                    log.warning("MLLP connection refused: %d connections open", MAX_CONNECTIONS)
                else:
                    log.warning(
                        "MLLP connection from %s refused: %d open from there", source, self.max_per_source
                    )
                connection.close()
                continue
            thread.start()

    def _serve(self, connection: socket.socket, source: str) -> None:
        framer = MllpFramer()
        frame_due: float | None = None
        """When the frame in hand (any byte received since the last complete frame) must be done."""
        try:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._closing:
                wait = self.idle_timeout
                if frame_due is not None:
                    left = frame_due - time.monotonic()
                    if left <= 0:
                        log.info(
                            "MLLP connection from %s closed: a frame took over %ss",
                            source,
                            self.frame_timeout,
                        )
                        break
                    wait = min(wait, left)
                connection.settimeout(wait)  # a recv that times out closes the connection
                data = connection.recv(65536)
                if not data:
                    break
                if frame_due is None:
                    frame_due = time.monotonic() + self.frame_timeout
                received = framer.feed(data)
                if received and not framer.pending:
                    frame_due = None
                elif received:  # the next frame began in the read that ended this one
                    frame_due = time.monotonic() + self.frame_timeout
                for message in received:
                    if self._closing:
                        break
                    connection.sendall(frame(self.handle(message)))
        except OSError:  # idle or frame timeout, reset by the peer, shut down by `stop`
            pass
        finally:
            with self._lock:
                self._connections.pop(connection, None)
                left_open = self._per_source.get(source, 1) - 1
                if left_open:
                    self._per_source[source] = left_open
                else:
                    self._per_source.pop(source, None)
            connection.close()

    def handle(self, received: Frame) -> bytes:
        """The framed message's ACK; never raises (a failure is that message's `AR`)."""
        try:
            return self._acknowledge(received).encode("utf-8")
        except Exception as exc:
            transient = _transient(exc)
            if transient is None:
                log.exception("MLLP message could not be handled")
                failed = Inspection(None, "", "the message could not be stored", "AR", INTERNAL_ERROR)
            else:  # nothing was stored: the sender keeps the message and sends it again
                log.warning("MLLP message not stored (%s): %s", transient, exc)
                header = inspect(received.payload) if not received.oversize else None
                message = header.message if header is not None else None
                failed = Inspection(message, "", transient, "AE", INTERNAL_ERROR, "MSH")
            return acknowledge(failed).text.encode("utf-8")

    def _acknowledge(self, received: Frame) -> str:
        if received.oversize:
            inspection = too_large(received.payload, received.oversize)
        else:
            inspection = inspect(received.payload)
        facility = inspection.facility
        if not facility:
            return (
                unroutable(inspection, facility)
                if inspection.message is not None
                else acknowledge(inspection)
            ).text
        where = self._routes.get(facility)
        # One transaction: the message, when accepted, and its event commit together, before the
        # ACK is built (docs/decisions/hl7.md, "MLLP: one commit per message").
        with self._db_slots, DriverTransaction(self.deployment.engine) as conn:
            if where is None:
                where = route(conn, facility)
                if where is None:
                    return unroutable(inspection, facility).text
            ack = deliver(conn, where, inspection)
            write_event(
                conn,
                org_id=where.org_id,
                sandbox_id=where.sandbox_id,
                type="hl7_outbound",
                method="MLLP",
                path=None,
                status=None,
                request=received.payload,
                response=ack.text.encode(),
                truncated=bool(received.oversize),
            )
        self._remember(facility, where, ack)
        return ack.text

    def _remember(self, facility: str, where: Route, ack: Ack) -> None:
        """Cache the route of a task run that took this message; forget one that refused it for
        good (ended: it never takes traffic again). Bounded: a full cache starts over."""
        if ack.code == "AR":
            self._routes.pop(facility, None)
        else:
            if len(self._routes) >= MAX_ROUTES:
                self._routes.clear()
            self._routes[facility] = where
