"""A tool call (`POST /v1/task-runs/{id}/tools/{name}`) is answered before the middleware stack and
routing (`AssayApp`, `service/tools/routes.py`): the answer — status, headers, body, the event its
request records, the trajectory step — is the one the route gives, refusals included, and a warm
call takes no worker thread (the trajectory's writes do not move the change epoch)."""

from __future__ import annotations

import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from jsonschema import Draft202012Validator

from assay.sandboxes import SURFACES
from assay.service.tools import routes as tool_routes
from assay.service.tools.arguments import _accepts
from assay.service.tools.catalog import TASK_READ
from tests.service.builders import make_benchmark, ok, start_run
from tests.service.conftest import Server

CALLS: list[tuple[str, bytes, dict[str, str]]] = [
    ("fhir_read", b'{"resource_type": "Patient", "id": "PATIENT"}', {"X-Tool-Call-Id": "c1"}),
    ("fhir_read", b'{"resource_type": "Patient", "id": "no-such-patient"}', {}),  # 404 OperationOutcome
    ("fhir_search", b'{"resource_type": "Patient", "params": {"family": "Toolpath"}}', {}),
    ("fhir_capabilities", b"", {}),  # no body: no arguments
    ("fhir_read", b'{"resource_type": "patient"}', {}),  # 422: the schema refuses it
    ("fhir_read", b"{not json", {}),  # 400
    ("no_such_tool", b"{}", {}),  # 404 naming the tools it offers
    ("fhir_read", b'{"resource_type": "Patient", "id": "PATIENT"}', {"Authorization": ""}),  # 401
    ("fhir_read", b'{"resource_type": "Patient", "id": "PATIENT"}', {"Authorization": "Bearer nope"}),
]


def _too_large(server: Server, path: str, token: str) -> tuple[int, bytes]:
    """A declared body over the cap, sent as headers only: refused before anything is read."""
    address = urlsplit(server.url)
    declared = (server.settings.max_body_bytes if server.settings else 50 * 1024 * 1024) + 1
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < 10:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_tool_call_is_answered_before_routing_exactly_as_the_route_answers_it(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi import FastAPI

    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    tools = f"/v1/task-runs/{task_run_id}/tools"
    routed: list[str] = []
    original = FastAPI.__call__

    async def counted(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            routed.append(scope["path"])
        await original(self, scope, receive, send)

    with server.client(run.token) as agent:
        playground_id = ok(agent.post(run.task_runs[0]["start_url"]))["playground_id"]
        patient = {"resourceType": "Patient", "name": [{"family": "Toolpath"}]}
        patient_id = ok(agent.post(f"/v1/task-runs/{task_run_id}/fhir/Patient", json=patient), 201)["id"]
        calls = [(name, body.replace(b"PATIENT", patient_id.encode()), h) for name, body, h in CALLS]
        ok(agent.post(f"{tools}/fhir_capabilities"))  # warm

        def answers() -> list[httpx.Response]:
            return [
                agent.post(f"{tools}/{name}", content=body, headers={"Content-Type": "application/json", **h})
                for name, body, h in calls
            ]

        monkeypatch.setattr(FastAPI, "__call__", counted)
        fast, fast_routed = answers(), list(routed)
        fast_too_large = _too_large(server, f"{tools}/fhir_read", run.token)

        async def declined(self: Any, scope: Any, receive: Any, send: Any) -> bool:
            return False

        monkeypatch.setattr(tool_routes.ToolCallPath, "__call__", declined)
        routed.clear()
        slow, slow_routed = answers(), list(routed)
        slow_too_large = _too_large(server, f"{tools}/fhir_read", run.token)
    assert not [path for path in fast_routed if "/tools/" in path], "no tool call was routed"
    assert len([path for path in slow_routed if "/tools/" in path]) == len(calls), "the routes answered"
    assert [r.status_code for r in fast] == [200, 404, 200, 200, 422, 400, 404, 401, 401]
    for (name, body, _), one, other in zip(calls, fast, slow, strict=True):
        assert one.status_code == other.status_code, (name, body)
        assert one.content == other.content, (name, body)
        for header in ("content-type", "content-length", "www-authenticate"):
            assert one.headers.get(header) == other.headers.get(header), (name, body, header)
        if one.status_code != 200:
            assert set(one.json()) == {"error"} and {"code", "message", "details"} <= set(one.json()["error"])
    assert fast_too_large == slow_too_large
    assert fast_too_large[0] == 413 and json.loads(fast_too_large[1])["error"]["code"] == "PAYLOAD_TOO_LARGE"

    sandboxes = ok(api.get(f"/playgrounds/{playground_id}"))["sandboxes"]
    [fhir] = [box for box in sandboxes if box["type"] == "fhir"]
    listed = ok(api.get(f"/sandboxes/{fhir['id']}/events", params={"limit": 100}))["data"]
    made = sum(1 for r in fast if r.status_code == 200 or "operation_outcome" in r.text)  # reached FHIR
    recorded = [(e["method"], e["path"], e["status"], e["response"]) for e in listed[-2 * made :]]
    assert recorded[:made] == recorded[made:], "the same events, before routing or routed"
    steps = ok(api.get(f"/task-runs/{task_run_id}/trajectory"))["tool_calls"]
    kept = [{k: v for k, v in step.items() if k not in ("seq", "at", "ms")} for step in steps]
    passes = kept[1:]  # after the warming call: the calls before routing, then the routed ones
    half = len(passes) // 2
    assert half >= 6 and passes[:half] == passes[half:], "the same trajectory steps"
    assert passes[0]["tool_call_id"] == "c1" and passes[0]["result"]["resource"]["id"] == patient_id


def _stale_reads(server: Server, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every worker-thread hand-off of the agent path's catch-up (a stale cache), from now on."""
    from assay.service import fast_path

    calls: list[Any] = []
    original = fast_path._Flights.run

    async def counted(self: Any, key: Any, work: Any) -> None:
        calls.append(key)
        await original(self, key, work)

    monkeypatch.setattr(fast_path._Flights, "run", counted)
    return calls


def test_a_warm_tool_call_finds_the_caches_current_after_the_trajectory_is_written(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the tool calls' trajectory changes nothing the agent path caches, so it must not
    make every cached task run stale: the next call is answered from the worker's caches."""
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    tools = f"/v1/task-runs/{task_run_id}/tools"
    read = {"resource_type": "Patient", "id": "nobody"}
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        assert agent.post(f"{tools}/fhir_read", json=read).status_code == 404  # warms
        assert agent.post(f"{tools}/fhir_search", json={"resource_type": "Patient"}).status_code == 200
        stale = _stale_reads(server, monkeypatch)
        for _ in range(3):
            assert agent.post(f"{tools}/fhir_read", json=read).status_code == 404
            ok(api.get(f"/task-runs/{task_run_id}/trajectory"))  # writes what is queued
            time.sleep(0.1)
            assert agent.post(f"{tools}/fhir_search", json={"resource_type": "Patient"}).status_code == 200
    assert stale == [], "no catch-up: the trajectory's writes left the caches current"


def _variants(schema: dict[str, Any]) -> list[Any]:
    """Arguments near the edges of `schema`: a valid example, then each property wrong in turn."""
    wrong = [None, 1, 1.5, True, "", "x" * 70, "../x", [], ["x"], {}, {"a": 1}, "Patient", "agent"]
    properties = schema.get("properties", {})
    valid = {name: _example(sub) for name, sub in properties.items()}
    out: list[Any] = [valid, {}, [], None, "x", {**valid, "unknown": 1}]
    for name in properties:
        out += [{**valid, name: value} for value in wrong]
        out.append({k: v for k, v in valid.items() if k != name})
    return out


def _example(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "string":
        return {"^[A-Z]": "Patient", "^[0-9*#]": "12#"}.get(str(schema.get("pattern", ""))[:6], "abc-1")
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [_example(schema.get("items", {}))]
    if kind == "object":
        return {name: _example(sub) for name, sub in schema.get("properties", {}).items()}
    return "abc"


def test_the_quick_schema_check_accepts_only_what_jsonschema_accepts() -> None:
    """The compiled check lets a call skip jsonschema only when jsonschema would accept it too
    (anything else goes to jsonschema, which words the refusal), and it knows every tool's schema."""
    tools = [TASK_READ] + [tool for surface in SURFACES.values() for tool in surface.tools]
    accepted = 0
    for tool in tools:
        accepts = _accepts(tool.input_schema)
        assert accepts is not None, f"{tool.name}: a keyword the quick check does not know"
        validator = Draft202012Validator(tool.input_schema)
        for arguments in _variants(tool.input_schema):
            if accepts(arguments):
                accepted += 1
                assert validator.is_valid(arguments), (tool.name, arguments)
    assert accepted >= len(tools), "each tool's valid example passes the quick check"
    assert _accepts({"type": "object", "not": {}}) is None  # unknown: jsonschema decides
