"""`assay mcp` through the MCP SDK's own client: over stdio (the real `assay` command in a child
process) and over streamable HTTP (the server's app under uvicorn in a thread), against a live Assay.

Seed 004's examples are sent verbatim, only `taskId` pointing at a task that exists.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from assay.clients.mcp import TOOLS, build_server
from assay.core.assertions import ASSERTION_MODELS
from tests.service.conftest import Server

SEED_FHIR = {
    "action": "create",
    "taskId": "task_xyz789",
    "label": "Appointment booked with correct provider",
    "weight": 1,
    "axis": "correctness",
    "assertion": {
        "assert": "fhir-resource-state",
        "resource_type": "Appointment",
        "search": {"patient": "Patient/john-smith", "status": "booked"},
        "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
    },
}
SEED_VOICE = {
    "action": "create",
    "taskId": "task_xyz789",
    "label": "Required disclosures",
    "weight": 0.5,
    "assertion": {
        "assert": "voice-transcript",
        "speaker": "agent",
        "contains": ["member ID", "date of birth"],
    },
}
SEED_LIST = {"action": "list", "taskId": "task_xyz789"}

Session = ClientSession
Scenario = Callable[[Session], Awaitable[None]]


async def call(session: Session, tool: str, args: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content  # type: ignore[union-attr]
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def refused(session: Session, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert result.is_error, result.content  # type: ignore[union-attr]
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    return body["error"]  # type: ignore[no-any-return]


def seeded(example: dict[str, Any], task_id: str) -> dict[str, Any]:
    return {**example, "taskId": task_id}


async def authoring(session: Session) -> None:
    tools = await session.list_tools()
    assert (
        {tool.name for tool in tools.tools}
        == set(TOOLS)
        == {
            "criteria",
            "evals",
            "benchmarks",
            "tasks",
            "benchmark-runs",
            "task-runs",
            "criterion-runs",
        }
    )
    criteria_schema = next(tool.input_schema for tool in tools.tools if tool.name == "criteria")
    union = criteria_schema["properties"]["assertion"]
    assert set(union["discriminator"]["mapping"]) == set(ASSERTION_MODELS)
    for ref in union["discriminator"]["mapping"].values():
        model = criteria_schema["$defs"][ref.removeprefix("#/$defs/")]
        assert model["examples"], ref  # the worked examples docs/assertions.md runs
    benchmark = await call(session, "benchmarks", {"action": "create", "name": f"mcp {uuid.uuid4().hex[:8]}"})
    task = await call(session, "tasks", {"action": "create", "benchmarkId": benchmark["id"], "name": "book"})

    fhir = await call(session, "criteria", seeded(SEED_FHIR, task["id"]))
    assert fhir["assertion"] == SEED_FHIR["assertion"] and fhir["axis"] == "correctness"
    voice = await call(session, "criteria", seeded(SEED_VOICE, task["id"]))
    assert voice["weight"] == 0.5
    listed = await call(session, "criteria", seeded(SEED_LIST, task["id"]))
    assert [c["id"] for c in listed["data"]] == [fhir["id"], voice["id"]]  # task order

    gated = await call(
        session, "criteria", {"action": "update", "id": fhir["id"], "required": True, "idleOk": True}
    )
    assert gated["required"] is True and gated["idle_ok"] is True  # camelCase in, the API's snake_case out
    updated = await call(session, "criteria", {"action": "update", "id": voice["id"], "label": "Disclosures"})
    assert updated["label"] == "Disclosures" and updated["assertion"] == SEED_VOICE["assertion"]
    assert await call(session, "criteria", {"action": "get", "id": voice["id"]}) == updated

    bad = {**SEED_FHIR["assertion"], "fields": [{"path": "status", "expected": "x", "operator": "sameAs"}]}
    error = await refused(session, "criteria", {**seeded(SEED_FHIR, task["id"]), "assertion": bad})
    assert error["code"] == "VALIDATION_ERROR" and "assertion.fields.0.operator" in error["details"]
    missing = await refused(session, "criteria", {"action": "create", "taskId": task["id"], "label": "x"})
    assert missing["details"] == {"assertion": ["field required"]}
    unknown = await refused(session, "criteria", {"action": "explode"})
    assert "action" in unknown["details"]
    absent = await refused(session, "criteria", {"action": "get", "id": "crit_01ARZ3NDEKTSV4RRFFQ69G5FAV"})
    assert absent["code"] == "NOT_FOUND"

    legacy = await call(
        session,
        "evals",
        {
            "action": "create",
            "taskId": task["id"],
            "label": "legacy",
            "assert": json.dumps(SEED_VOICE["assertion"]),
        },
    )
    assert (
        legacy["assertion"] == SEED_VOICE["assertion"]
        and json.loads(legacy["assert"]) == SEED_VOICE["assertion"]
    )
    typo = {"assert": "voice-transcript", "speeker": "agent"}
    bad_eval = await refused(
        session,
        "evals",
        {"action": "create", "taskId": task["id"], "label": "typo", "assert": json.dumps(typo)},
    )
    assert "assertion.speeker" in bad_eval["details"]
    assert await call(session, "criteria", {"action": "delete", "id": legacy["id"]}) == {"deleted": True}
    text = "The agent confirms the appointment time with the caller."
    spoken = await call(
        session, "evals", {"action": "create", "taskId": task["id"], "label": "tone", "assert": text}
    )
    assert spoken["assertion"] == {"assert": "natural-language", "text": text} and spoken["assert"] == text
    assert (await call(session, "evals", {"action": "get", "id": spoken["id"]}))["assert"] == text

    published = await call(session, "benchmarks", {"action": "publish", "id": benchmark["id"]})
    run = await call(session, "benchmark-runs", {"action": "create", "benchmark": published["slug"]})
    task_run_id = run["task_runs"][0]["id"]
    token = run["bearer_token"]
    started = await call(session, "task-runs", {"action": "start", "id": task_run_id, "runToken": token})
    assert started["phase"] == "started"
    completed = await call(session, "task-runs", {"action": "complete", "id": task_run_id, "runToken": token})
    assert completed["verdict"] == "fail" and len(completed["checks"]) == 3
    judged = completed["checks"][2]
    assert judged["label"] == "tone" and not judged["passed"] and "judge" in judged["details"], judged
    runs = await call(session, "criterion-runs", {"action": "list", "taskRunId": task_run_id})
    detail = await call(session, "criterion-runs", {"action": "get", "id": runs["data"][0]["id"]})
    assert detail["evidence"] is not None
    summary = await call(session, "benchmark-runs", {"action": "get", "id": run["benchmark_run_id"]})
    assert summary["status"] == "completed"
    listed = await call(session, "benchmark-runs", {"action": "list", "benchmarkId": benchmark["id"]})
    assert [r["id"] for r in listed["data"]] == [run["benchmark_run_id"]]  # publish's self-tests left out
    every = await call(
        session, "benchmark-runs", {"action": "list", "benchmarkId": benchmark["id"], "selfTests": True}
    )
    assert {r["agent"]["name"] for r in every["data"] if r["agent"]} == {"assay self-test"}
    assert len(every["data"]) > 1


def _assay_command() -> str:
    found = Path(sys.executable).with_name("assay")
    return str(found) if found.exists() else shutil.which("assay") or "assay"


def test_stdio(server: Server) -> None:
    params = StdioServerParameters(
        command=_assay_command(),
        args=["mcp"],
        env={
            "ASSAY_BASE_URL": server.url,
            "ASSAY_API_KEY": server.org_key,
            "PATH": os.environ.get("PATH", ""),
        },
    )

    async def scenario() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await authoring(session)

    anyio.run(scenario)


@pytest.fixture
def mcp_http(server: Server) -> Iterator[str]:
    app = build_server(api_key=server.org_key, base_url=server.url).streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    uv.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "MCP HTTP server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_streamable_http(mcp_http: str) -> None:
    async def scenario() -> None:
        async with (
            streamable_http_client(mcp_http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            await authoring(session)

    anyio.run(scenario)
