"""The demo's tasks worked two ways: by the scripted agent over the protocols (`demo/agent.py`)
and by the same steps through tools only, given any `call(name, arguments)`; same slips on purpose."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from assay.client import Assay
from assay.clients.demo.agent import ACTIONS, ELIGIBILITY_270, AgentContext
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
    appointment = {
        "resourceType": "Appointment",
        "status": "booked",
        "start": "2026-12-03T09:00:00Z",
        "end": "2026-12-03T09:30:00Z",
        "minutesDuration": 30,
        "participant": [
            {"actor": {"reference": f"Practitioner/{doctor}", "display": "Dr. Rivera"}, "status": "accepted"},
            {"actor": {"reference": f"Patient/{patient}", "display": "John Smith"}, "status": "accepted"},
        ],
    }
    created = await call("fhir_create", {"resource": appointment})
    assert created["status"] == 201, created


async def update_phone(call: Call) -> None:
    patient = (await call("fhir_read", {"resource_type": "Patient", "id": "john-smith"}))["resource"]
    patient = copy.deepcopy(patient)
    patient["telecom"][0]["value"] = "555-0124"  # the scripted agent's slip, kept
    await call("fhir_update", {"resource_type": "Patient", "id": "john-smith", "resource": patient})


async def notify_lab(call: Call) -> None:
    facility = (await call("task_read", {}))["facts"]["hl7"]["receiving_facility"]
    message = "\n".join(
        [
            f"MSH|^~\\&|FRONTDESK|CLINIC|LAB|{facility}|20261126090000||ADT^A08|FO0001|P|2.5.1",
            "EVN|A08|20261126090000",
            "PID|1||M123456^^^ACME^MB||SMITH^JOHN||19620417|M|||||555-0142",
        ]
    )
    ack = await call("hl7_send", {"message": message})
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
    )
    assert answer["kind"] == "271" and "EB*1" in answer["response"], answer


async def file_referral(call: Call) -> None:
    listed = await call("sftp_list", {"prefix": "inbox/referrals/"})
    assert [f["path"] for f in listed["files"]] == ["inbox/referrals/smith-cardiology.txt"], listed
    letter = await call("sftp_read", {"path": "inbox/referrals/smith-cardiology.txt"})
    await call("sftp_write", {"path": "outbox/cardiology/smith-cardiology.txt", "content": letter["content"]})


async def prior_auth(call: Call) -> None:
    request = {
        "patient": {"member_id": "M123456", "name": "John Smith", "birth_date": "1962-04-17"},
        "provider": {"npi": "1234567893", "name": "Front Office Clinic"},
        "procedure_code": "93306",
        "diagnosis_codes": ["R07.89"],
        "service_date": "2026-12-10",
    }
    await call("portal_submit", {"resource": "prior_auth_requests", "record": request})


async def call_member(call: Call) -> None:
    turns = [
        {"speaker": "agent", "text": "Hello, this is the Front Office Clinic calling for John Smith."},
        {"speaker": "caller", "text": "Speaking."},
        {"speaker": "agent", "text": "Before we go on, could you confirm your member ID?"},
        {"speaker": "caller", "text": "It's M123456."},
        {"speaker": "agent", "text": "Thank you. You're booked with Dr. Rivera on December 3rd at 9 AM."},
    ]
    await call("voice_turns", {"turns": turns})


async def call_payer(call: Call) -> None:
    number = (await call("task_read", {}))["facts"]["voice"]["phone_number"]
    call_id = (await call("call_dial", {"to": number}))["call_id"]
    for digits in ("3", "1234567893", "1"):  # authorization; the NPI; confirm the read-back
        await call("call_dtmf", {"call_id": call_id, "digits": digits})
    await call("call_say", {"call_id": call_id, "text": "M 1 2 3 4 5 6"})
    for digits in ("1", "04171962", "1"):  # confirm; the date of birth; confirm (then the hold)
        await call("call_dtmf", {"call_id": call_id, "digits": digits})
    for text in (
        "Hi, this is Front Office Clinic.",
        "What is the status of the prior authorization for procedure 70551?",
        "May I have the call reference number? That's all, thank you, goodbye.",
    ):
        answer = await call("call_say", {"call_id": call_id, "text": text})
    reference = next(turn["text"] for turn in answer["said"] if turn["kind"] == "reference")
    note = {"note_id": "CALL-1", "member_id": "M123456", "reference": reference, "topic": "PA 70551"}
    await call("portal_submit", {"resource": "call_notes", "record": note})


TOOL_ACTIONS: dict[str, Callable[[Call], Awaitable[None]]] = {
    "Book a follow-up with Dr. Rivera": book_follow_up,
    "Record John Smith's new phone number": update_phone,
    "Tell the lab system about the update (HL7 ADT^A08)": notify_lab,
    "Check John Smith's eligibility (X12 270/271)": check_eligibility,
    "File the cardiology referral on the SFTP drop": file_referral,
    "Request prior authorization for the echocardiogram": prior_auth,
    "Call John Smith to confirm the visit": call_member,
    "Ask ACME Health by phone about the MRI authorization": call_payer,
}

__all__ = ["ELIGIBILITY_270", "TOOL_ACTIONS", "Call", "create_run", "scripted_scores"]
