"""A task run's tools over MCP, through the official client: streamable HTTP at
`/v1/task-runs/{id}/mcp` (run token, no MCP session) and `assay mcp --run-token` over stdio (the
real command in a child process). Both work the demo's tasks through tools only to the scores
the scripted agent reaches through the protocols; neither reaches another run or the grading."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.service.conftest import Server
from tests.service.tools.conftest import TaskTurn, WorkTask
from tests.service.tools.support import TOOL_ACTIONS, create_run


def _caller(session: ClientSession) -> Any:
    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await session.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
        value = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert result.structured_content == value
        return value  # type: ignore[no-any-return]

    return call


def _assay_command() -> str:
    found = shutil.which("assay") or str(Path(sys.executable).parent / "assay")
    assert Path(found).exists(), found
    return found


def test_mcp_over_http_reaches_the_scripted_scores(
    server: Server, scores_like_the_scripted_agent: Callable[[WorkTask], None]
) -> None:
    async def work(turn: TaskTurn) -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {turn.token}"}, timeout=60) as mcp_http,
            streamable_http_client(
                f"{server.url}/v1/task-runs/{turn.task_run_id}/mcp", http_client=mcp_http
            ) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert "task_read" in listed and "fhir_search" in listed and listed["hl7_send"].output_schema
            task = await _caller(session)("task_read", {})
            assert task["name"] == turn.name and "criteria" not in json.dumps(task)
            await TOOL_ACTIONS[turn.name](_caller(session))

    scores_like_the_scripted_agent(work)


def test_mcp_over_http_is_scoped_by_url_and_token(server: Server, front_office: str) -> None:
    mine, my_runs = create_run(server, front_office)
    theirs, their_runs = create_run(server, front_office)
    my_run = next(iter(my_runs.values()))
    their_run = next(iter(their_runs.values()))
    with server.client(theirs) as http:
        http.post(f"/v1/task-runs/{their_run}/start").raise_for_status()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=server.url, timeout=30) as raw:
        # no token, an org key, and my token on their task run: refused before any MCP is spoken
        assert raw.post(f"/v1/task-runs/{my_run}/mcp", json=initialize, headers=accept).status_code == 401
        org = {**accept, "Authorization": f"Bearer {server.org_key}"}
        assert (
            raw.post(f"/v1/task-runs/{my_run}/mcp", json=initialize, headers=org).json()["error"]["code"]
            == "FORBIDDEN"
        )
        crossed = raw.post(
            f"/v1/task-runs/{their_run}/mcp",
            json=initialize,
            headers={**accept, "Authorization": f"Bearer {mine}"},
        )
        assert crossed.status_code == 404 and crossed.json()["error"]["code"] == "NOT_FOUND"
        # their own token works, with no session: tools/call without initialize is answered
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "task_read", "arguments": {}},
        }
        own = {**accept, "Authorization": f"Bearer {theirs}", "MCP-Protocol-Version": "2025-06-18"}
        answered = raw.post(f"/v1/task-runs/{their_run}/mcp", json=call, headers=own)
        assert answered.status_code == 200, answered.text
        assert "mcp-session-id" not in answered.headers
        text = answered.json()["result"]["content"][0]["text"]
        assert json.loads(text)["task_run_id"] == their_run


def test_assay_mcp_run_token_over_stdio(
    server: Server, scores_like_the_scripted_agent: Callable[[WorkTask], None]
) -> None:
    async def work(turn: TaskTurn) -> None:
        args = ["mcp", "--run-token", turn.token, "--url", server.url, "--task-run", turn.task_run_id]
        params = StdioServerParameters(
            command=_assay_command(), args=args, env={"PATH": os.environ.get("PATH", "")}
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = [tool.name for tool in (await session.list_tools()).tools]
            assert names[0] == "task_read" and "sftp_write" in names
            unknown = await session.call_tool("grading_read", {})
            assert unknown.is_error
            assert json.loads(unknown.content[0].text)["error"]["code"] == "NOT_FOUND"  # type: ignore[union-attr]
            await TOOL_ACTIONS[turn.name](_caller(session))

    scores_like_the_scripted_agent(work)


def test_run_mcp_url_names_the_task_run() -> None:
    from assay.clients.run_mcp import run_target

    target = run_target("http://h:1/v1/task-runs/trun_1/mcp", "tok", None)
    assert (target.base_url, target.task_run_id) == ("http://h:1", "trun_1")
    with pytest.raises(ValueError, match="--task-run"):
        run_target("http://h:1", "tok", None)
