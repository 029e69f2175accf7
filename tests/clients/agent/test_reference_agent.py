"""`assay agent run` against a live server and a scripted OpenAI-compatible model (a real HTTP
server started here): the loop works the demo's tasks through tools; a malformed argument, an
unknown tool and a model that times out cost the model, never the run; the summary reports the
score, interval, pass^k and the viewer's links; the conversation is the task run's trajectory."""

from __future__ import annotations

import json
from typing import Any

import httpx
from typer.testing import CliRunner

from assay.clients.agent import SYSTEM_PROMPT
from assay.clients.cli import app
from assay.clients.demo.agent import appointment
from tests.clients.agent.stub_model import stub_model, tool_call
from tests.service.conftest import Server

BOOK = "Book a follow-up with Dr. Rivera"
PHONE = "Record John Smith's new phone number"
LAB = "Tell the lab system about the update (HL7 ADT^A08)"
ELIGIBILITY = "Check John Smith's eligibility (X12 270/271)"
REFERRAL = "File the cardiology referral on the SFTP drop"
PRIOR_AUTH = "Request prior authorization for the echocardiogram"
CALL = "Call John Smith to confirm the visit"


def _last_tool(messages: list[dict[str, Any]]) -> Any:
    return json.loads(next(m for m in reversed(messages) if m["role"] == "tool")["content"])


def _book(turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if turn == 0:  # not JSON: answered with BAD_REQUEST, nothing run
        return {
            "content": None,
            "tool_calls": [tool_call("c0", "fhir_search", "{resource_type: Practitioner")],
        }
    if turn == 1:
        assert _last_tool(messages)["error"]["code"] == "BAD_REQUEST"
        search = {"resource_type": "Practitioner", "params": {"name": "Rivera"}}
        return {"content": None, "tool_calls": [tool_call("c1", "fhir_search", search)]}
    if turn == 2:
        doctor = _last_tool(messages)["resource"]["entry"][0]["resource"]["id"]
        return {
            "content": None,
            "tool_calls": [tool_call("c2", "fhir_create", {"resource": appointment("john-smith", doctor)})],
        }
    return {"content": "Booked."}


def _lab(turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if turn == 0:
        return {"content": None, "tool_calls": [tool_call("l0", "task_read", {})]}
    if turn == 1:
        facility = _last_tool(messages)["facts"]["hl7"]["receiving_facility"]
        message = (
            f"MSH|^~\\&|FRONTDESK|CLINIC|LAB|{facility}|20261126090000||ADT^A08|FO0001|P|2.5.1\n"
            "EVN|A08|20261126090000\nPID|1||M123456^^^ACME^MB||SMITH^JOHN||19620417|M|||||555-0142"
        )
        return {"content": None, "tool_calls": [tool_call("l1", "hl7_send", {"message": message})]}
    assert _last_tool(messages)["code"] == "AA"
    return {"content": "Sent."}


def _one_call(name: str, arguments: dict[str, Any]) -> Any:
    def turns(turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if turn == 0:
            return {"content": None, "tool_calls": [tool_call("x0", name, arguments)]}
        return {"content": "Done."}

    return turns


def _referral(turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if turn == 0:
        return {
            "content": None,
            "tool_calls": [tool_call("r0", "sftp_read", {"path": "inbox/referrals/smith-cardiology.txt"})],
        }
    if turn == 1:
        letter = _last_tool(messages)["content"]
        write = {"path": "outbox/cardiology/smith-cardiology.txt", "content": letter}
        return {"content": None, "tool_calls": [tool_call("r1", "sftp_write", write)]}
    return {"content": "Filed."}


def _phone(turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if turn == 0:  # a tool nobody offers: the service's NOT_FOUND, listing the real ones
        return {"content": None, "tool_calls": [tool_call("p0", "ehr_update_phone", {"phone": "555-0142"})]}
    assert _last_tool(messages)["error"]["code"] == "NOT_FOUND"
    return {"content": "I could not do it."}


SCRIPTS = {
    BOOK: _book,
    LAB: _lab,
    PHONE: _phone,
    ELIGIBILITY: _one_call(
        "x12_eligibility",
        {
            "member_id": "M123456",
            "first_name": "JOHN",
            "last_name": "SMITH",
            "birth_date": "1962-04-17",
            "payer_id": "842610001",
            "payer_name": "ACME HEALTH",
            "provider_npi": "1234567893",
        },
    ),
    REFERRAL: _referral,
    PRIOR_AUTH: _one_call(
        "portal_submit",
        {
            "resource": "prior_auth_requests",
            "record": {
                "patient": {"member_id": "M123456", "name": "John Smith", "birth_date": "1962-04-17"},
                "provider": {"npi": "1234567893", "name": "Front Office Clinic"},
                "procedure_code": "93306",
                "diagnosis_codes": ["R07.89"],
                "service_date": "2026-12-10",
            },
        },
    ),
}


def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert tools and all(tool["type"] == "function" for tool in tools)
    task = messages[1]["content"].split("\n", 1)[0].removeprefix("Task: ")
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if task == CALL:
        return {"sleep": 6, "content": "too late"}  # past --max-seconds
    return SCRIPTS[task](turn, messages)  # type: ignore[no-any-return]


def test_reference_agent_runs_the_benchmark(server: Server, front_office: str) -> None:
    with stub_model(script) as (model_url, requests):
        args = ["agent", "run", front_office, "--model-url", model_url, "--model", "stub-1", "--url", server.url,
                "--api-key", server.org_key, "--concurrency", "4", "--trials", "2", "--max-steps", "6",
                "--max-seconds", "4"]  # fmt: skip
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.stdout, result.exception)
    out = result.stdout
    assert "pass^2" in out and "95% interval" in out and "/ui/runs/" in out, out
    assert out.count(f"pass 1.0  {BOOK}") == 2 and out.count(f"pass 1.0  {LAB}") == 2, out
    for name in (ELIGIBILITY, REFERRAL, PRIOR_AUTH):
        assert out.count(f"pass 1.0  {name}") == 2, (name, out)
    assert out.count("max_seconds") == 2 and out.count(f"fail 0.0  {CALL}") == 2, out
    assert {request["model"] for request in requests} == {"stub-1"}
    run_id = out.split("/ui/runs/")[1].split()[0]
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.org_key}"}) as org:
        run = org.get(f"/benchmark-runs/{run_id}").json()
        assert run["trials"] == 2 and run["statistics"]["pass_hat_k"] is not None
        book = next(t for t in run["task_runs"] if t["name"] == BOOK)
        trajectory = org.get(f"/task-runs/{book['id']}/trajectory").json()
    roles = [m["role"] for m in trajectory["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and roles.count("tool") == 3
    executed = [(t["name"], t["status"]) for t in trajectory["tool_calls"]]
    assert executed == [("fhir_search", 200), ("fhir_create", 201)]  # the malformed call never ran
