"""Tools over plain HTTP (`GET/POST /v1/task-runs/{id}/tools…`): the demo's tasks done through
tools only score what the scripted agent scores through the protocols; the schemas in both
formats; refusals in the API envelope; the same events and write gate as the protocol path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.service.conftest import Server, serving
from tests.service.tools.conftest import TaskTurn, WorkTask
from tests.service.tools.support import TOOL_ACTIONS, create_run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _caller(http: httpx.AsyncClient, task_run_id: str) -> Any:
    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        response = await http.post(f"/v1/task-runs/{task_run_id}/tools/{name}", json=arguments)
        assert response.status_code == 200, (name, response.status_code, response.text)
        return response.json()  # type: ignore[no-any-return]

    return call


def test_tools_only_reach_the_scripted_agents_scores(
    scores_like_the_scripted_agent: Callable[[WorkTask], None],
) -> None:
    async def work(turn: TaskTurn) -> None:
        await TOOL_ACTIONS[turn.name](_caller(turn.http, turn.task_run_id))

    scores_like_the_scripted_agent(work)


def test_schemas_in_both_formats_describe_every_parameter(server: Server, front_office: str) -> None:
    token, task_runs = create_run(server, front_office)
    task_run_id = next(iter(task_runs.values()))
    with server.client(token) as http:
        before = http.get(f"/v1/task-runs/{task_run_id}/tools").json()
        assert [t["function"]["name"] for t in before["tools"]] == ["task_read"]  # no sandboxes yet
        http.post(f"/v1/task-runs/{task_run_id}/start").raise_for_status()
        openai = http.get(f"/v1/task-runs/{task_run_id}/tools", params={"format": "openai"}).json()["tools"]
        anthropic = http.get(f"/v1/task-runs/{task_run_id}/tools", params={"format": "anthropic"}).json()[
            "tools"
        ]
        assert http.get(f"/v1/task-runs/{task_run_id}/tools", params={"format": "xml"}).status_code == 400
    names = [t["function"]["name"] for t in openai]
    assert names == [t["name"] for t in anthropic]
    for wanted in ("task_read", "fhir_capabilities", "fhir_search", "fhir_read", "fhir_create", "fhir_update",
                   "fhir_patch", "fhir_transaction", "hl7_send", "hl7_inbox", "x12_eligibility",
                   "x12_claim_status", "x12_prior_auth", "sftp_list", "sftp_read", "sftp_write",
                   "portal_list", "portal_get", "portal_submit"):  # fmt: skip
        assert wanted in names
    for tool in openai:
        assert tool["type"] == "function" and tool["function"]["description"]
        parameters = tool["function"]["parameters"]
        assert parameters["type"] == "object"
        for name, schema in parameters["properties"].items():
            assert schema.get("description"), (tool["function"]["name"], name)
    for tool in anthropic:
        assert tool["input_schema"]["type"] == "object"


def test_refusals_carry_the_envelope_and_the_write_gate_holds(server: Server, front_office: str) -> None:
    token, task_runs = create_run(server, front_office)
    task_run_id = task_runs["Book a follow-up with Dr. Rivera"]
    base = f"/v1/task-runs/{task_run_id}"
    with server.client(token) as http:
        http.post(f"{base}/start").raise_for_status()

        def refused(name: str, body: Any, status: int, code: str) -> dict[str, Any]:
            response = http.post(f"{base}/tools/{name}", json=body)
            assert response.status_code == status, response.text
            error = response.json()["error"]
            assert set(error) == {"code", "message", "details"} and error["code"] == code
            return error  # type: ignore[no-any-return]

        assert "fhir_search" in refused("no_such_tool", {}, 404, "NOT_FOUND")["details"]["tools"]
        assert "resource_type" in refused("fhir_search", {"params": {}}, 422, "VALIDATION_ERROR")[
            "message"
        ] + str(refused("fhir_search", {"params": {}}, 422, "VALIDATION_ERROR")["details"])
        refused("fhir_read", {"resource_type": "Patient", "id": "../metadata"}, 422, "VALIDATION_ERROR")
        outcome = refused("fhir_read", {"resource_type": "Patient", "id": "nobody"}, 404, "NOT_FOUND")
        assert outcome["details"]["operation_outcome"]["resourceType"] == "OperationOutcome"
        bad_json = http.post(
            f"{base}/tools/fhir_search", content=b"{nope", headers={"Content-Type": "application/json"}
        )
        assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "BAD_REQUEST"
        # a tool call is the protocol request: its event is in the sandbox's log
        http.post(
            f"{base}/tools/fhir_read", json={"resource_type": "Patient", "id": "john-smith"}
        ).raise_for_status()
        http.post(f"{base}/complete").raise_for_status()
        # the task run ended: the write gate refuses the tool as it refuses the route
        refused(
            "fhir_create", {"resource": {"resourceType": "Basic", "code": {"text": "x"}}}, 409, "CONFLICT"
        )
    with server.client() as org:
        sandboxes = org.get(f"/task-runs/{task_run_id}").json()
        playground = sandboxes["playground_id"]
        found = org.get(f"/playgrounds/{playground}").json()
        fhir = next(s for s in found["sandboxes"] if s["type"] == "fhir")
        events = org.get(f"/sandboxes/{fhir['id']}/events", params={"limit": 100}).json()["data"]
    assert any(e["method"] == "GET" and e["path"].endswith("/fhir/Patient/john-smith") for e in events), (
        events
    )


def test_hl7_send_routes_as_mllp(server: Server, front_office: str) -> None:
    token, task_runs = create_run(server, front_office)
    task_run_id = task_runs["Tell the lab system about the update (HL7 ADT^A08)"]
    base = f"/v1/task-runs/{task_run_id}"
    with server.client(token) as http:
        http.post(f"{base}/start").raise_for_status()
        message = "MSH|^~\\&|A|B|LAB|SOMEONE-ELSE|20261126090000||ADT^A08|X1|P|2.5.1\rEVN|A08|20261126090000"
        ack = http.post(f"{base}/tools/hl7_send", json={"message": message}).json()
        assert ack["code"] == "AR" and not ack["accepted"] and "SOMEONE-ELSE" in ack["ack"]
        garbage = http.post(f"{base}/tools/hl7_send", json={"message": "hello"}).json()
        assert garbage["code"] in {"AR", "AE"} and not garbage["accepted"]


def test_a_tool_call_takes_one_request_from_the_rate_limit(server: Server, front_office: str) -> None:
    token, task_runs = create_run(server, front_office)
    task_run_id = task_runs["Book a follow-up with Dr. Rivera"]
    with server.client(token) as http:
        http.post(f"/v1/task-runs/{task_run_id}/start").raise_for_status()
    with serving(server, rate_limit=0.001, rate_limit_burst=3) as limited, limited.client(token) as http:
        arguments = {"resource_type": "Patient", "id": "john-smith"}
        answers = [
            http.post(f"/v1/task-runs/{task_run_id}/tools/fhir_read", json=arguments) for _ in range(4)
        ]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[3].json()["error"]["code"] == "RATE_LIMITED"
