"""The MLLP listener (SPEC §5.2, §7): one asyncio TCP server per deployment, default port 2575.

MLLP frames a message as `0x0B <message> 0x1C 0x0D`. `MllpFramer` turns a byte stream into
frames, tolerating what real senders and hostile peers do: several messages per connection,
frames split across reads (or several per read), junk between frames (skipped), a start byte
inside an open frame (the unfinished frame is dropped and the new one read), and frames over
the 1 MB limit (read to their end without being kept, then answered `AR`; the connection stays).
Its work is linear in the bytes received: each byte is scanned once.

Each message is routed by MSH-6.1 to the started task run whose credentials hold that
`receiving_facility`; an unknown facility or an ended task run gets `AR`. The database work runs
in a thread so one slow write never stalls other connections; a connection idle for
`idle_timeout` seconds is closed. Nothing a peer sends can stop the listener: every failure is
that message's `AR`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from assay.sandboxes.hl7.ack import INTERNAL_ERROR, MAX_MESSAGE_BYTES, Inspection, acknowledge, inspect
from assay.sandboxes.hl7.store import accept, destination, unroutable
from assay.sandboxes.surface import Deployment, SandboxHandle

__all__ = ["END", "START", "Frame", "MllpFramer", "MllpListener", "frame"]

log = logging.getLogger("assay.sandboxes.hl7")

START = b"\x0b"
END = b"\x1c\x0d"
DEFAULT_IDLE_TIMEOUT = 300.0


def frame(message: bytes) -> bytes:
    return START + message + END


@dataclass(frozen=True, slots=True)
class Frame:
    payload: bytes
    oversize: int = 0
    """The size of a frame over the limit (its bytes were not kept), else 0."""


class MllpFramer:
    """Incremental MLLP deframing; `feed` returns the frames completed by `data`."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES):
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._open = False
        self._scanned = 0
        self._dropped = 0

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
                self._open, self._scanned, self._dropped = True, 0, 0
            end = self._buffer.find(END, max(self._scanned - 1, 0))
            restart = self._buffer.find(START, self._scanned, end if end >= 0 else len(self._buffer))
            if restart >= 0:  # a new frame began before this one ended: drop the unfinished one
                del self._buffer[: restart + 1]
                self._scanned, self._dropped = 0, 0
                continue
            if end < 0:
                self._scanned = len(self._buffer)
                self._spill()
                return frames
            size = self._dropped + end
            if size > self.max_bytes:
                frames.append(Frame(b"", size))
            else:
                frames.append(Frame(bytes(self._buffer[:end])))
            del self._buffer[: end + len(END)]
            self._open = False

    def _spill(self) -> None:
        """Past the limit, keep only the last byte (it may be half of the end marker)."""
        if self._dropped + len(self._buffer) > self.max_bytes and len(self._buffer) > 1:
            self._dropped += len(self._buffer) - 1
            del self._buffer[:-1]
            self._scanned = 1


class MllpListener:
    """The deployment's MLLP server; `start` returns the bound port."""

    def __init__(self, deployment: Deployment, port: int, idle_timeout: float = DEFAULT_IDLE_TIMEOUT):
        self.deployment = deployment
        self.port = port
        self.idle_timeout = idle_timeout
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.deployment.host, self.port)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        framer = MllpFramer()
        try:
            while True:
                data = await asyncio.wait_for(reader.read(65536), self.idle_timeout)
                if not data:
                    break
                for received in framer.feed(data):
                    ack = await asyncio.to_thread(self.handle, received)
                    writer.write(frame(ack))
                await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def handle(self, received: Frame) -> bytes:
        """The framed message's ACK; never raises (a failure is that message's `AR`)."""
        try:
            return self._acknowledge(received).encode("utf-8")
        except Exception:
            log.exception("MLLP message could not be handled")
            failed = Inspection(None, "", "the message could not be stored", "AR", INTERNAL_ERROR)
            return acknowledge(failed).text.encode("utf-8")

    def _acknowledge(self, received: Frame) -> str:
        if received.oversize:
            too_big = f"message of {received.oversize} bytes is over the 1 MB limit"
            return acknowledge(Inspection(None, "", too_big, "AR", INTERNAL_ERROR, "MSH")).text
        inspection = inspect(received.payload)
        facility = inspection.facility
        if not facility:
            return (
                unroutable(inspection, facility)
                if inspection.message is not None
                else acknowledge(inspection)
            ).text
        with self.deployment.engine.begin() as conn:  # routing and storing: one transaction
            where = destination(conn, facility)
            if where is None:
                return unroutable(inspection, facility).text
            ack = accept(conn, where.sandbox_id, inspection, where.refusal)
        handle = SandboxHandle(
            self.deployment, where.org_id, where.task_run_id, where.playground_id, where.sandbox_id, {}
        )
        handle.record(
            "hl7_outbound",
            method="MLLP",
            path=None,
            status=None,
            request=received.payload,
            response=ack.text.encode(),
        )
        return ack.text
