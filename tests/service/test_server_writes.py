"""One socket write per response (`assay.service.server._OneWritePerResponse`), driven through
uvicorn's httptools protocol as `assay serve` runs it, with a transport that records writes."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import Response, StreamingResponse
from uvicorn.server import ServerState

from assay.service.server import JOIN_AT_MOST, NoDelayHttpToolsProtocol


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _app(parts_written: list[int]) -> FastAPI:
    app = FastAPI()

    @app.get("/json")
    async def json_answer() -> dict[str, str]:
        return {"hello": "x" * 4000}

    @app.get("/big")
    async def big() -> Response:
        return Response(b"x" * (JOIN_AT_MOST + 1), media_type="application/octet-stream")

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def parts() -> Any:
            for number in range(3):
                parts_written.append(number)
                yield f"part {number}\n".encode()
                await asyncio.sleep(0.01)  # a pause between parts, as a slow producer makes

        return StreamingResponse(parts(), media_type="text/plain")

    return app


def _connection(app: FastAPI) -> tuple[NoDelayHttpToolsProtocol, RecordingTransport]:
    config = uvicorn.Config(app, http=NoDelayHttpToolsProtocol, lifespan="off", log_level="warning")
    config.load()
    protocol = NoDelayHttpToolsProtocol(config, ServerState(), {}, asyncio.get_running_loop())
    transport = RecordingTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def _until(condition: Any) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.001)


def test_a_response_goes_to_the_socket_in_one_write_headers_and_body_together() -> None:
    async def scenario() -> None:
        protocol, transport = _connection(_app([]))
        protocol.data_received(b"GET /json HTTP/1.1\r\nhost: x\r\n\r\n")
        await _until(lambda: transport.writes)
        await asyncio.sleep(0.05)  # nothing more follows
        assert len(transport.writes) == 1, transport.writes
        head, _, body = transport.writes[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b'{"hello":"' + b"x" * 4000 + b'"}'
        # keep-alive: the next request on the connection is answered the same way
        protocol.data_received(b"GET /json HTTP/1.1\r\nhost: x\r\n\r\n")
        await _until(lambda: len(transport.writes) == 2)
        assert transport.writes[1].startswith(b"HTTP/1.1 200 OK") and transport.writes[1].endswith(b'"}')

    asyncio.run(scenario())


def test_a_streamed_response_is_not_held_past_the_step_that_wrote_each_part() -> None:
    async def scenario() -> None:
        produced: list[int] = []
        protocol, transport = _connection(_app(produced))
        protocol.data_received(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        await _until(lambda: produced == [0])
        await _until(lambda: b"part 0" in b"".join(transport.writes))
        assert produced == [0], "the first part reached the socket while the producer paused"
        await _until(lambda: b"0\r\n\r\n" in b"".join(transport.writes))
        sent = b"".join(transport.writes)
        assert sent.startswith(b"HTTP/1.1 200 OK")
        assert [line for line in sent.split(b"\r\n") if line.startswith(b"part")] == [
            b"part 0\n",
            b"part 1\n",
            b"part 2\n",
        ]

    asyncio.run(scenario())


def test_closing_the_connection_sends_what_was_written_first() -> None:
    async def scenario() -> None:
        protocol, transport = _connection(_app([]))
        protocol.data_received(b"GET /json HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        await _until(lambda: transport.closed)
        assert len(transport.writes) == 1 and transport.writes[0].endswith(b'"}')

    asyncio.run(scenario())


def test_a_big_body_is_handed_to_the_socket_as_it_is_not_copied_behind_its_headers() -> None:
    async def scenario() -> None:
        protocol, transport = _connection(_app([]))
        protocol.data_received(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
        await _until(lambda: len(transport.writes) >= 2)
        await asyncio.sleep(0.05)
        head, body = transport.writes
        assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
        assert body == b"x" * (JOIN_AT_MOST + 1)

    asyncio.run(scenario())
