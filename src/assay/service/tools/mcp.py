"""The task run's tools over MCP: streamable HTTP at `/v1/task-runs/{id}/mcp`.

Scoped by URL and token, not by MCP session: every POST carries the run token (`Authorization:
Bearer …`) and is answered by a stateless server built for that task run and token alone (the
SDK's stateless streamable HTTP, JSON answers), so there is no session to steal, expire or share,
and a request with another run's token reaches nothing of this one. The token is checked before
any MCP is spoken: a missing, unknown or other-kind token is the API's 401/403 envelope, a task run
outside the token's run its 404. `tools/list` is `GET …/tools?format=mcp`; `tools/call` is the
same executor as `POST …/tools/{name}` (`execute.py`): a refusal is a tool error (`isError`) whose
text is the API envelope, a result is its JSON text plus `structuredContent`.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from assay import __version__
from assay.service.tools.catalog import formatted
from assay.service.tools.execute import ToolOutcome, Tools, _domain_status, error_envelope, tools_of_app
from assay.store.errors import DomainError

__all__ = ["INSTRUCTIONS", "build_run_server", "mount_mcp", "outcome_result", "tool_list"]

INSTRUCTIONS = (
    "Tools of one Assay task run: call task_read first for your instructions, then work the task "
    "through the surfaces' tools. Every call is recorded and graded once the task run completes."
)


def tool_list(described: list[dict[str, Any]]) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=tool["name"],
                description=tool["description"],
                input_schema=tool["inputSchema"],
                output_schema=tool.get("outputSchema"),
            )
            for tool in described
        ]
    )


def outcome_result(outcome: ToolOutcome) -> types.CallToolResult:
    """A tool's outcome as MCP: the JSON as text (and structured, when it succeeded)."""
    # The JSON the HTTP route answers: a FHIR tool's is the route's body spliced, not re-encoded.
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=outcome.body.decode())]
    if outcome.error is not None:
        return types.CallToolResult(content=content, is_error=True)
    return types.CallToolResult(content=content, structured_content=outcome.result)


def build_run_server(tools: Tools, task_run_id: str, authorization: str) -> Server[Any]:
    """An MCP server for one task run and token (one per request: module docstring)."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        offered = await tools.offered(await tools.caller(authorization), task_run_id)
        return tool_list(formatted(list(offered.values()), "mcp"))

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        outcome = await tools.call(authorization, task_run_id, params.name, params.arguments or {})
        return outcome_result(outcome)

    return Server(
        "assay-task-run",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class _RunMcp:
    """The ASGI endpoint of `/v1/task-runs/{id}/mcp` (an instance, so Starlette hands it the raw scope)."""

    def __init__(self, app: FastAPI):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        task_run_id = scope["path_params"]["task_run_id"]
        authorization = request.headers.get("authorization")
        tools = tools_of_app(self.app)
        try:
            await tools.offered(await tools.caller(authorization), task_run_id)
        except DomainError as refused:
            status, code = _domain_status(refused)
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            response = JSONResponse(
                error_envelope(code, refused.message, refused.details), status, headers=headers
            )
            await response(scope, receive, send)
            return
        if request.method != "POST":  # stateless: no server-initiated stream, no session to delete
            body = error_envelope(
                "BAD_REQUEST", "this MCP endpoint is stateless: POST JSON-RPC messages to it"
            )
            await JSONResponse(body, 405, headers={"Allow": "POST"})(scope, receive, send)
            return
        server = build_run_server(tools, task_run_id, authorization or "")
        manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True)
        async with manager.run():
            await manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI) -> None:
    app.router.routes.append(
        Route("/v1/task-runs/{task_run_id}/mcp", _RunMcp(app), methods=["GET", "POST", "DELETE"])
    )
