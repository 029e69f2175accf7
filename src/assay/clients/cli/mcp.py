"""`assay mcp` (SPEC §8): the MCP server on stdio, or streamable HTTP with `--http`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

__all__ = ["mcp"]


def mcp(
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option(help="With --http: interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="With --http: port.")] = 8401,
    api_key: Annotated[str | None, typer.Option(help="Org API key (default: ASSAY_API_KEY).")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Assay API (default: ASSAY_BASE_URL, else http://127.0.0.1:8400).")
    ] = None,
) -> None:
    """Serve Assay's authoring and results tools over MCP."""
    import anyio

    from assay.clients.mcp import build_server, serve_http, serve_stdio

    server = build_server(api_key=api_key, base_url=base_url)
    if http:
        print(f"Assay MCP on http://{host}:{port}/mcp", file=sys.stderr)
        serve_http(server, host, port)
    else:
        anyio.run(serve_stdio, server)
