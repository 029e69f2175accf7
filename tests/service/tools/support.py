"""The demo's tasks worked two ways: by the scripted agent over the protocols (`demo/agent.py`'s
`ACTIONS`) and by the same steps through tools only, given any `call(name, arguments)`: each tools
twin is the action of the same name, sending the agent's own data, so it makes the same slips."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from assay.client import Assay
from assay.clients.demo.agent import (
    ACTIONS,
    ELIGIBILITY_270,
    MEMBER_CALL_TURNS,
    NEW_PHONE,
    PAYER_CALL,
    PRIOR_AUTH_REQUEST,
    REFERRAL,
    AgentContext,
    adt_a08,
    appointment,
    call_note,
)
from tests.service.conftest import Server

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def create_run(server: Server, benchmark: str) -> tuple[str, dict[str, str]]:
    """A new benchmark run: its token and task run id by task name."""
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        run = client.benchmark_runs.create(benchmark=benchmark, agent={"name": "tests"})
    return run.bearer_token, {task.name: task.id for task in run.task_runs}


def scripted_scores(server: Server, benchmark: str) -> dict[str, float | None]:
    """Task name → score of the scripted agent through the real protocols."""
    token, task_runs = create_run(server, benchmark)
    scores = {}
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        for name, task_run_id in task_runs.items():
            started = client.task_runs.start(task_run_id, run_token=token)
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
                ACTIONS[name](AgentContext(http, started.endpoints, started.credentials, []))
            scores[name] = client.task_runs.complete(task_run_id, run_token=token).score
    return scores


async def book_follow_up(call: Call) -> None:
    patients = await call("fhir_search", {"resource_type": "Patient", "params": {"name": "Smith"}})
    patient = patients["resource"]["entry"][0]["resource"]["id"]
    doctors = await call("fhir_search", {"resource_type": "Practitioner", "params": {"name": "Rivera"}})
    doctor = doctors["resource"]["entry"][0]["resource"]["id"]
    created = await call("fhir_create", {"resource": appointment(patient, doctor)})
    assert created["status"] == 201, created


async def update_phone(call: Call) -> None:
    patient = (await call("fhir_read", {"resource_type": "Patient", "id": "john-smith"}))["resource"]
    patient = copy.deepcopy(patient)
    patient["telecom"][0]["value"] = NEW_PHONE
    await call("fhir_update", {"resource_type": "Patient", "id": "john-smith", "resource": patient})


async def notify_lab(call: Call) -> None:
    facility = (await call("task_read", {}))["facts"]["hl7"]["receiving_facility"]
    ack = await call("hl7_send", {"message": "\n".join(adt_a08(facility))})
    assert ack["accepted"] and ack["code"] == "AA", ack


async def check_eligibility(call: Call) -> None:
    answer = await call(
        "x12_eligibility",
        {
            "member_id": "M123456",
            "first_name": "JOHN",
            "last_name": "SMITH",
            "birth_date": "1962-04-17",
            "service_date": "2026-12-03",
            "payer_id": "842610001",
            "payer_name": "ACME HEALTH",
            "provider_npi": "1234567893",
            "provider_name": "FRONT OFFICE CLINIC",
        },
    )  # the fields of the scripted agent's ELIGIBILITY_270
    assert answer["kind"] == "271" and "EB*1" in answer["response"], answer


async def file_referral(call: Call) -> None:
    source, target = REFERRAL
    listed = await call("sftp_list", {"prefix": source.rpartition("/")[0] + "/"})
    assert [f["path"] for f in listed["files"]] == [source], listed
    letter = await call("sftp_read", {"path": source})
    await call("sftp_write", {"path": target, "content": letter["content"]})


async def prior_auth(call: Call) -> None:
    await call("portal_submit", {"resource": "prior_auth_requests", "record": PRIOR_AUTH_REQUEST})


async def call_member(call: Call) -> None:
    await call("voice_turns", {"turns": MEMBER_CALL_TURNS})


async def call_payer(call: Call) -> None:
    number = (await call("task_read", {}))["facts"]["voice"]["phone_number"]
    call_id = (await call("call_dial", {"to": number}))["call_id"]
    for kind, value in PAYER_CALL:
        argument = {"digits": value} if kind == "dtmf" else {"text": value}
        answer = await call(f"call_{kind}", {"call_id": call_id, **argument})
    reference = next(turn["text"] for turn in answer["said"] if turn["kind"] == "reference")
    await call("portal_submit", {"resource": "call_notes", "record": call_note(reference)})


_TOOL_TWINS: dict[str, Callable[[Call], Awaitable[None]]] = {
    twin.__name__: twin
    for twin in (
        book_follow_up,
        update_phone,
        notify_lab,
        check_eligibility,
        file_referral,
        prior_auth,
        call_member,
        call_payer,
    )
}
"""Each of the scripted agent's actions done through tools, by the action's name."""

TOOL_ACTIONS: dict[str, Callable[[Call], Awaitable[None]]] = {
    task: _TOOL_TWINS[action.__name__] for task, action in ACTIONS.items()
}
"""Task name → its tools twin, for every task the scripted agent works (`ACTIONS`)."""

__all__ = ["ELIGIBILITY_270", "TOOL_ACTIONS", "Call", "create_run", "scripted_scores"]
