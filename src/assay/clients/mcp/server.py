"""`assay mcp`: the tools of `tools.py` served over MCP (the official SDK's low-level server), on
stdio or, with `--http`, streamable HTTP at `/mcp` (docs/sdk.md).

Every call goes through the SDK (`AsyncAssay`) to the Assay API at `ASSAY_BASE_URL` with the org key
in `ASSAY_API_KEY`. A result is one JSON text content; a refusal — ours (`InvalidCall`) or the API's
(`APIStatusError`) — is a tool error (`isError`) whose text is the error envelope of docs/api.md, so an
agent sees exactly what the HTTP API would have said.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from assay import __version__
from assay.client import AssayError, AsyncAssay
from assay.clients.mcp.tools import TOOLS, InvalidCall, run_tool

__all__ = ["build_server", "serve_http", "serve_stdio"]


def _text(value: Any, *, error: bool = False) -> types.CallToolResult:
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))
    ]
    return types.CallToolResult(content=content, is_error=error)


def _envelope(exc: AssayError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message, "details": exc.details}}


def build_server(api_key: str | None = None, base_url: str | None = None) -> Server[AsyncAssay]:
    """The MCP server; its lifespan holds one `AsyncAssay` (one connection pool) for every call."""

    @asynccontextmanager
    async def lifespan(_server: Server[AsyncAssay]) -> AsyncIterator[AsyncAssay]:
        async with AsyncAssay(api_key=api_key, base_url=base_url) as client:
            yield client

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema())
                for tool in TOOLS.values()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        client: AsyncAssay = ctx.lifespan_context
        try:
            result = await run_tool(client, params.name, dict(params.arguments or {}))
        except InvalidCall as invalid:
            return _text(invalid.envelope(), error=True)
        except AssayError as refused:
            return _text(_envelope(refused), error=True)
        return _text(result)

    return Server(
        "assay",
        version=__version__,
        instructions="Author Assay benchmarks (benchmarks, tasks, criteria) and read their runs.",
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[AsyncAssay]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(server: Server[AsyncAssay], host: str, port: int) -> None:
    """Streamable HTTP at `http://host:port/mcp` under uvicorn (blocks until Ctrl-C)."""
    import uvicorn

    uvicorn.run(server.streamable_http_app(host=host), host=host, port=port, log_level="warning")
