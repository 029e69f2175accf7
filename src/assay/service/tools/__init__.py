"""Agent tools: each surface's typed tools (`sandboxes/tools.py`) served to any harness — as
function schemas and a call route (`routes.py`), as a run-scoped MCP server (`mcp.py`) — and the
trajectory they leave (`trajectory.py`). `install_tools(app)` mounts all of it."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from assay.service.limits import json_body_limit
from assay.service.tools.routes import export_router, tool_router, trajectory_router

__all__ = ["install_tools"]


def install_tools(app: FastAPI) -> None:
    from assay.service.tools.mcp import mount_mcp

    app.include_router(tool_router, prefix="/v1")
    app.include_router(trajectory_router, prefix="/v1", dependencies=[Depends(json_body_limit)])
    app.include_router(export_router)
    mount_mcp(app)
