"""`assay mcp --run-token TOKEN --url URL [--task-run ID]`: one task run's tools over MCP on stdio.

For an MCP host that launches servers as commands (Claude Desktop, IDEs, Inspect's
`mcp_server_stdio`). It holds no state of its own: `tools/list` is `GET /v1/task-runs/{id}/tools
?format=mcp` and `tools/call` is `POST /v1/task-runs/{id}/tools/{name}` on the Assay at `URL`,
with the run token, so every call is the service's own (recorded, limited, graded the same).
`URL` is the Assay base URL (then `--task-run` names the task run) or the task run's MCP URL,
`…/v1/task-runs/{id}/mcp`, which names it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from assay import __version__

__all__ = ["RunTarget", "build_run_stdio_server", "run_target", "serve_run_stdio"]

_RUN_MCP_URL = re.compile(r"^(?P<base>.*?)/v1/task-runs/(?P<id>[^/]+)(?:/mcp)?/?$")
INSTRUCTIONS = (
    "Tools of one Assay task run: call task_read first for your instructions, then work the task "
    "through the surfaces' tools. Every call is recorded and graded once the task run completes."
)


class RunTarget:
    def __init__(self, base_url: str, task_run_id: str, run_token: str):
        self.base_url, self.task_run_id, self.run_token = base_url.rstrip("/"), task_run_id, run_token


def run_target(url: str, run_token: str, task_run_id: str | None) -> RunTarget:
    """Where the tools live; `ValueError` when no task run is named."""
    found = _RUN_MCP_URL.match(url.rstrip("/"))
    if found is not None:
        if task_run_id and task_run_id != found["id"]:
            raise ValueError(f"--task-run {task_run_id} disagrees with the URL's task run {found['id']}")
        return RunTarget(found["base"], found["id"], run_token)
    if not task_run_id:
        raise ValueError("name the task run: --task-run ID, or a URL ending /v1/task-runs/ID/mcp")
    return RunTarget(url, task_run_id, run_token)


def _text(value: Any, *, error: bool = False, structured: Any = None) -> types.CallToolResult:
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))
    ]
    return types.CallToolResult(content=content, is_error=error, structured_content=structured)


def build_run_stdio_server(target: RunTarget, http: httpx.AsyncClient) -> Server[Any]:
    base = f"/v1/task-runs/{target.task_run_id}"

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        response = await http.get(f"{base}/tools", params={"format": "mcp"})
        response.raise_for_status()
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool["name"],
                    description=tool["description"],
                    input_schema=tool["inputSchema"],
                    output_schema=tool.get("outputSchema"),
                )
                for tool in response.json()["tools"]
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        response = await http.post(f"{base}/tools/{params.name}", json=params.arguments or {})
        try:
            body = response.json()
        except ValueError:
            body = {"error": {"code": "INTERNAL_ERROR", "message": response.text[:2000], "details": {}}}
        if response.status_code >= 400:
            return _text(body, error=True)
        return _text(body, structured=body)

    return Server(
        "assay-task-run",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_run_stdio(target: RunTarget) -> None:
    headers = {"Authorization": f"Bearer {target.run_token}"}
    async with (
        httpx.AsyncClient(base_url=target.base_url, headers=headers, timeout=120) as http,
        stdio_server() as (read_stream, write_stream),
    ):
        server = build_run_stdio_server(target, http)
        await server.run(read_stream, write_stream, server.create_initialization_options())
