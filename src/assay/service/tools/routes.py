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

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from assay.service.deps import AnyCaller, RunCaller, SessionDep
from assay.service.errors import ERROR_RESPONSES
from assay.service.runs import repository as repo
from assay.service.tools.catalog import FORMATS, formatted
from assay.service.tools.execute import error_envelope, tools_of_app
from assay.service.tools.trajectory import append_steps, export, validate_steps
from assay.service.transactions import TransactionRoute
from assay.store import BadRequest

__all__ = ["export_router", "tool_router", "trajectory_router"]

tool_router = APIRouter(tags=["agent tools"], responses=ERROR_RESPONSES)
trajectory_router = APIRouter(tags=["agent tools"], responses=ERROR_RESPONSES, route_class=TransactionRoute)
export_router = APIRouter(tags=["agent tools"], responses=ERROR_RESPONSES, route_class=TransactionRoute)


@tool_router.get("/task-runs/{task_run_id}/tools")
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


@tool_router.post("/task-runs/{task_run_id}/tools/{name}")
async def call_tool(
    task_run_id: str,
    name: str,
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_tool_call_id: Annotated[
        str | None, Header(description="The model's id for this call, kept in the trajectory")
    ] = None,
) -> JSONResponse:
    """Run one tool; the body is its arguments (a JSON object, `{}` or empty for none)."""
    raw = await request.body()
    arguments: Any = {}
    if raw.strip():
        try:
            arguments = json.loads(raw)
        except (ValueError, RecursionError):
            body = error_envelope(
                "BAD_REQUEST", "the body is not valid JSON: send the tool's arguments as an object"
            )
            return JSONResponse(body, status_code=400)
    outcome = await tools_of_app(request.app).call(
        authorization, task_run_id, name, arguments, call_id=x_tool_call_id
    )
    if outcome.error is not None:
        headers = {"WWW-Authenticate": "Bearer"} if outcome.status == 401 else None
        return JSONResponse(outcome.error, status_code=outcome.status, headers=headers)
    return JSONResponse(outcome.result)


@trajectory_router.post("/task-runs/{task_run_id}/trajectory", status_code=201)
def post_trajectory(
    task_run_id: str, body: dict[str, Any], session: SessionDep, caller: RunCaller
) -> JSONResponse:
    """Store the agent's messages: `{"steps": [{role, content, tool_calls?, tool_call_id?, name?}]}`."""
    task_run = repo.get_task_run(session, caller, task_run_id)
    steps = validate_steps(body.get("steps"))
    total = append_steps(session, task_run.org_id, task_run.id, steps)
    return JSONResponse({"stored": len(steps), "steps": total}, status_code=201)


@export_router.get("/task-runs/{task_run_id}/trajectory")
async def get_trajectory(task_run_id: str, request: Request, caller: AnyCaller) -> JSONResponse:
    """The trajectory as OpenAI chat `messages` plus the executed `tool_calls`, one `seq` order."""
    database = request.app.state.database

    def read() -> dict[str, Any]:
        tools_of_app(request.app).trajectory.flush()
        with database.reading() as session:
            task_run = repo.get_task_run(session, caller, task_run_id)
            return export(session, task_run.id)

    return JSONResponse(await run_in_threadpool(read))
