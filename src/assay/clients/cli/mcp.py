"""`assay mcp` (docs/sdk.md): the MCP server on stdio, or streamable HTTP with `--http`."""

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
    run_token: Annotated[
        str | None, typer.Option(help="Serve one task run's agent tools instead (stdio), with its run token.")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="With --run-token: the Assay URL, or the task run's …/v1/task-runs/ID/mcp."),
    ] = None,
    task_run: Annotated[
        str | None, typer.Option(help="With --run-token: the task run (unless the URL names it).")
    ] = None,
) -> None:
    """Serve Assay's authoring and results tools over MCP (or, with --run-token, a task run's agent tools)."""
    import anyio

    if run_token:
        from assay.clients.run_mcp import run_target, serve_run_stdio

        try:
            target = run_target(url or base_url or "http://127.0.0.1:8400", run_token, task_run)
        except ValueError as problem:
            raise typer.BadParameter(str(problem)) from None
        anyio.run(serve_run_stdio, target)
        return

    from assay.clients.mcp import build_server, serve_http, serve_stdio

    server = build_server(api_key=api_key, base_url=base_url)
    if http:
        print(f"Assay MCP on http://{host}:{port}/mcp", file=sys.stderr)
        serve_http(server, host, port)
    else:
        anyio.run(serve_stdio, server)
