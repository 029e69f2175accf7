"""The tools and trajectory routes of a task run (run token, like the rest of `/v1`):

    GET  /v1/task-runs/{id}/tools?format=openai|anthropic|mcp   the tools it offers, in that format
    POST /v1/task-runs/{id}/tools/{name}                       run one; the body is its arguments
    POST /v1/task-runs/{id}/trajectory                         the agent's messages (`trajectory.py`)
    GET  /task-runs/{id}/trajectory                            the export (org key, or its run token)

A tool call answers 200 with the tool's output (its `output_schema`), or the status the surface
answered with the API's error envelope. The tool routes take no part of the rate limit themselves:
the surface request a tool makes is the request counted, as it would be sent directly.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from assay.sandboxes.openapi import json_answer
from assay.service.deps import AnyCaller, RunCaller, SessionDep
from assay.service.errors import ERROR_RESPONSES
from assay.service.limits import payload_too_large
from assay.service.runs import queries
from assay.service.tools.catalog import FORMATS, formatted
from assay.service.tools.execute import error_envelope, tools_of_app
from assay.service.tools.trajectory import append_steps, export, validate_steps
from assay.service.transactions import TransactionRoute
from assay.store import BadRequest

__all__ = ["ToolCallPath", "export_router", "tool_router", "trajectory_router"]

tool_router = APIRouter(tags=["agent tools"], responses=ERROR_RESPONSES)
trajectory_router = APIRouter(tags=["agent tools"], responses=ERROR_RESPONSES, route_class=TransactionRoute)
export_router = APIRouter(tags=["agent tools"], responses=ERROR_RESPONSES, route_class=TransactionRoute)


_TOOLS = {
    "type": "object",
    "required": ["format", "tools"],
    "properties": {
        "format": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "object"}, "description": "The tools, in `format`"},
    },
}
_RESULT = {"type": "object", "description": "The tool's output (its `output_schema`)"}
_STORED = {
    "type": "object",
    "required": ["stored", "steps"],
    "properties": {"stored": {"type": "integer"}, "steps": {"type": "integer"}},
}
_EXPORT = {
    "type": "object",
    "required": ["task_run_id", "format", "messages", "tool_calls"],
    "properties": {
        "task_run_id": {"type": "string"},
        "format": {"type": "string", "description": "`openai-chat`"},
        "messages": {
            "type": "array",
            "items": {"type": "object"},
            "description": "As posted, with seq and at",
        },
        "tool_calls": {"type": "array", "items": {"type": "object"}, "description": "As executed"},
    },
}


@tool_router.get("/task-runs/{task_run_id}/tools", responses=json_answer(_TOOLS, "The tools it offers"))
async def list_tools(
    task_run_id: str,
    request: Request,
    format: Annotated[str, Query(description="openai (default), anthropic or mcp")] = "openai",
    authorization: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    """The tools this task run offers: `task_read`, and each of its surfaces' tools."""
    if format not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
    tools = tools_of_app(request.app)
    offered = await tools.offered(await tools.caller(authorization), task_run_id)
    return JSONResponse({"format": format, "tools": formatted(list(offered.values()), format)})


@tool_router.post(
    "/task-runs/{task_run_id}/tools/{name}", responses=json_answer(_RESULT, "The tool's output")
)
async def call_tool(
    task_run_id: str,
    name: str,
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_tool_call_id: Annotated[
        str | None, Header(description="The model's id for this call, kept in the trajectory")
    ] = None,
) -> Response:
    """Run one tool; the body is its arguments (a JSON object, `{}` or empty for none).
    `ToolCallPath` answers it before routing; this route documents it and answers the rest."""
    return await answer_tool_call(
        request.app, task_run_id, name, await request.body(), authorization, x_tool_call_id
    )


async def answer_tool_call(
    app: Any, task_run_id: str, name: str, raw: bytes, authorization: str | None, call_id: str | None
) -> Response:
    arguments: Any = {}
    if raw.strip():
        try:
            arguments = json.loads(raw)
        except (ValueError, RecursionError):
            body = error_envelope(
                "BAD_REQUEST", "the body is not valid JSON: send the tool's arguments as an object"
            )
            return JSONResponse(body, status_code=400)
    outcome = await tools_of_app(app).call(authorization, task_run_id, name, arguments, call_id=call_id)
    if outcome.error is not None:
        headers = {"WWW-Authenticate": "Bearer"} if outcome.status == 401 else None
        return JSONResponse(outcome.error, status_code=outcome.status, headers=headers)
    return Response(outcome.body, media_type="application/json")  # `JSONResponse`'s, encoded once


_TOOL_CALL = re.compile(r"/v1/task-runs/([^/]+)/tools/([^/]+)")


class ToolCallPath:
    """`POST /v1/task-runs/{id}/tools/{name}` answered before the middleware stack and routing
    (`AssayApp.__call__`, `service/fast_path.py`): a tool call is as hot as the surface request it
    makes, which the surfaces' fast path answers there too, and the stack's layers (each wrapping
    `send`) and matching against every route cost more than the tool's own work.

    What the stack does for this route is done here: the body-size cap (413 `PAYLOAD_TOO_LARGE`,
    a declared length before anything is read, a chunked body once it passes the cap) and, for an
    error nothing answered, the app's `Exception` handler (its envelope, logged, then re-raised as
    the server's error middleware does). A call it declines (`False`: the app has not started)
    goes to the route above, which answers it the same way."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bool:
        found = _TOOL_CALL.fullmatch(scope["path"])
        if found is None or scope.get("root_path"):
            return False
        settings = getattr(self.app.state, "settings", None)
        if settings is None:
            return False
        max_bytes = settings.max_body_bytes
        authorization = call_id = None
        for key, value in scope["headers"]:
            if key == b"content-length" and value.isdigit() and int(value) > max_bytes:
                await payload_too_large(max_bytes)(scope, receive, send)
                return True
            if key == b"authorization":
                authorization = value.decode("latin-1")
            elif key == b"x-tool-call-id":
                call_id = value.decode("latin-1")
        started = False
        try:
            raw = b""
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return True
                raw += message.get("body", b"")
                if len(raw) > max_bytes:
                    await payload_too_large(max_bytes)(scope, receive, send)
                    return True
                if not message.get("more_body"):
                    break
            response = await answer_tool_call(self.app, found[1], found[2], raw, authorization, call_id)
            # What `Response.__call__` sends (it has no background task), without its wrapping.
            started = True
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": response.raw_headers,
                }
            )
            await send({"type": "http.response.body", "body": response.body})
        except Exception as error:
            if started:
                raise
            answer = self.app.exception_handlers[Exception](Request(scope), error)
            if inspect.isawaitable(answer):
                answer = await answer
            await answer(scope, receive, send)
            raise
        return True


@trajectory_router.post(
    "/task-runs/{task_run_id}/trajectory", status_code=201, responses=json_answer(_STORED, "Stored", 201)
)
def post_trajectory(
    task_run_id: str, body: dict[str, Any], session: SessionDep, caller: RunCaller
) -> JSONResponse:
    """Store the agent's messages: `{"steps": [{role, content, tool_calls?, tool_call_id?, name?}]}`."""
    task_run = queries.get_task_run(session, caller, task_run_id)
    steps = validate_steps(body.get("steps"))
    total = append_steps(session, task_run.org_id, task_run.id, steps)
    return JSONResponse({"stored": len(steps), "steps": total}, status_code=201)


@export_router.get("/task-runs/{task_run_id}/trajectory", responses=json_answer(_EXPORT, "The trajectory"))
async def get_trajectory(task_run_id: str, request: Request, caller: AnyCaller) -> JSONResponse:
    """The trajectory as OpenAI chat `messages` plus the executed `tool_calls`, one `seq` order."""
    database = request.app.state.database

    def read() -> dict[str, Any]:
        tools_of_app(request.app).trajectory.flush()
        with database.reading() as session:
            task_run = queries.get_task_run(session, caller, task_run_id)
            return export(session, task_run.id)

    return JSONResponse(await run_in_threadpool(read))
