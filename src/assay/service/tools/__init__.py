"""Agent tools: each surface's typed tools (`sandboxes/tools.py`) served to any harness — as
function schemas and a call route (`routes.py`), as a run-scoped MCP server (`mcp.py`) — and the
trajectory they leave (`trajectory.py`). `install_tools(app)` mounts all of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI

from assay.service.limits import json_body_limit
from assay.service.tools.routes import ToolCallPath, export_router, tool_router, trajectory_router

__all__ = ["install_tools"]


def install_tools(app: FastAPI) -> None:
    from assay.service.tools.execute import tools_of_app
    from assay.service.tools.mcp import mount_mcp

    opened = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with opened(running) as state:
            tools_of_app(running).open_trajectory(running.state.database)  # this lifespan's database
            try:
                yield state
            finally:  # before the app's lifespan disposes of the database
                tools_of_app(running).trajectory.close()

    app.router.lifespan_context = lifespan
    app.state.tool_calls = ToolCallPath(app)  # answered before the middleware stack (`AssayApp`)
    app.include_router(tool_router, prefix="/v1")
    app.include_router(trajectory_router, prefix="/v1", dependencies=[Depends(json_body_limit)])
    app.include_router(export_router)
    mount_mcp(app)
