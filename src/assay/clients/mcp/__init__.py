"""The MCP server (docs/sdk.md): `criteria`, legacy `evals`, `benchmarks`, `tasks`, `benchmark-runs`,
`task-runs` and `criterion-runs`, over the SDK (`assay.client`), never the service itself."""

from __future__ import annotations

from assay.clients.mcp.server import build_server, serve_http, serve_stdio
from assay.clients.mcp.tools import TOOLS

__all__ = ["TOOLS", "build_server", "serve_http", "serve_stdio"]
