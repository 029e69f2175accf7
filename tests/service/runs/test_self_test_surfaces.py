"""Task self-tests end to end on the six surfaces — FHIR, HL7, X12, files, portal, voice (issue 14: "an idle agent
is flagged on exactly the criteria it passes; a reference solution passes; `publish` refuses and
then accepts with the fix; a failed required criterion zeroes the task with `gated_by`").

Each task is what an author would plausibly write: a real criterion the agent must earn, plus ones
that a do-nothing agent passes (a seeded row or file that is already there, a "changed nothing it
should not" rule). The self-test must flag exactly those — checked against the idle trial's own
criterion results — honour `idle_ok`, and replay the reference solution (the surfaces' own requests:
FHIR REST to `fhir/Appointment`, ER7 to `hl7/outbound`, X12 to `x12/270` and `x12/278`, a `PUT` to
`files/…`, a portal `POST`, the agent's turns to `voice/turns`) to a full pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.sandboxes.payer.samples import PAYER
from tests.sandboxes.portal.world import MRI_APPROVED, PORTAL, SUBMISSION
from tests.sandboxes.x12.requests import eligibility_270, interchange, review_278, subscriber_270
from tests.service.builders import ALICE_AND_BOB, criterion, error, make_dataset, ok, unique

Json = dict[str, Any]


@dataclass
class Surface:
    """One surface's task: datasets, scenario, criteria by label, which pass idle, the reference."""

    kind: str
    data: Json
    criteria: dict[str, Json]
    idle_passes: list[str]
    gate: str
    """The criterion the agent must earn: made `required` so `idle_ok` rules cannot score alone."""
    actions: list[Json]
    scenario: list[Json] = field(default_factory=list)


_ADT = (
    "MSH|^~\\&|AGENT|CLINIC|LAB|HOSP|20260301120500||ADT^A08^ADT_A01|OUT-1|P|2.5.1\r"
    "EVN|A08|20260301120500\r"
    "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
)
_INBOX = (
    "MSH|^~\\&|REG|HOSP|AGENT|CLINIC|20260301120000||ADT^A04^ADT_A01|IN-1|P|2.5.1\r"
    "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
)
_REFERRAL = {"patient": {"member_id": "M123", "name": "Ann Lee"}, "specialty": "cardiology"}
_270 = interchange(
    "270",
    eligibility_270(
        subscriber_270("W123456789", trace="TRACE-1", last="DOE", first="JANE", birth="19800412")
    ),
)

_278 = interchange("278", review_278("W123456789", "70553"), control=906)

SURFACES = {
    "fhir": Surface(
        kind="fhir",
        data=ALICE_AND_BOB,
        criteria={
            "booked alice": {
                "assert": "fhir-resource-state",
                "resource_type": "Appointment",
                "search": {"patient": "Patient/alice", "status": "booked"},
                "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
            },
            "alice on file": {
                "assert": "fhir-resource-state",
                "resource_type": "Patient",
                "search": {"_id": "alice"},
                "fields": [{"path": "name.0.family", "expected": "Adams"}],
            },
            "only alice's appointment": {
                "assert": "no-unexpected-changes",
                "surfaces": ["fhir"],
                "allow": [
                    {
                        "resourceType": "Appointment",
                        "change": "created",
                        "search": {"patient": "Patient/alice"},
                        "max": 1,
                    }
                ],
            },
        },
        idle_passes=["alice on file", "only alice's appointment"],
        gate="booked alice",
        actions=[
            {
                "method": "POST",
                "path": "fhir/Appointment",
                "json": {
                    "resourceType": "Appointment",
                    "status": "booked",
                    "participant": [
                        {"actor": {"display": "Dr. Rivera"}, "status": "accepted"},
                        {"actor": {"reference": "Patient/alice"}, "status": "accepted"},
                    ],
                },
            }
        ],
    ),
    "voice": Surface(
        kind="voice",
        data={"turns": [{"speaker": "ivr", "text": "Thank you for calling Acme Health."}]},
        criteria={
            "asked for the member ID": {
                "assert": "voice-transcript",
                "speaker": "agent",
                "contains": ["member ID", "date of birth"],
            },
            "never asked for the SSN": {
                "assert": "voice-transcript",
                "speaker": "agent",
                "not_contains": ["social security number"],
            },
            "the IVR greeted": {
                "assert": "voice-transcript",
                "speaker": "ivr",
                "contains": ["thank you for calling"],
            },
        },
        idle_passes=["never asked for the SSN", "the IVR greeted"],
        gate="asked for the member ID",
        actions=[
            {
                "method": "POST",
                "path": "voice/turns",
                "json": [
                    {"speaker": "agent", "text": "Hello, may I have the member ID and date of birth?"},
                    {"speaker": "caller", "text": "W123456789, April 12 1980."},
                ],
            }
        ],
    ),
    "hl7": Surface(
        kind="hl7",
        data={"inbox": [_INBOX]},
        criteria={
            "sent the A08": {
                "assert": "hl7-structural",
                "correlate_by": {"message_type": "ADT^A08"},
                "fields": [
                    {"path": "PID.3.1", "expected": "MRN123"},
                    {"path": "PID.5.1", "expected": "SMITH"},
                ],
            },
            "no other message": {
                "assert": "no-unexpected-changes",
                "surfaces": ["hl7"],
                "allow": [{"message_type": "ADT^A08", "where": {"PID.3.1": "MRN123"}, "max": 1}],
            },
        },
        idle_passes=["no other message"],
        gate="sent the A08",
        actions=[
            {
                "method": "POST",
                "path": "hl7/outbound",
                "body": _ADT,
                "content_type": "x-application/hl7-v2+er7",
            }
        ],
    ),
    "x12": Surface(
        kind="x12",
        data=PAYER,
        criteria={
            "asked eligibility": {
                "assert": "x12-response",
                "transaction": "271",
                "correlate_by": {"member_id": "W123456789", "trace_number": "TRACE-1"},
                "fields": [{"path": "2110C/EB[1]03", "expected": "30"}],
            },
            "changed nothing but a review": {
                "assert": "no-unexpected-changes",
                "allow": [{"transaction_set": "278"}],
            },
            "one review for the member": {
                "assert": "no-unexpected-changes",
                "surfaces": ["x12"],
                "allow": [{"transaction_set": "278", "member_id": "W123456789", "max": 1}],
            },
        },
        idle_passes=["changed nothing but a review", "one review for the member"],
        gate="asked eligibility",
        actions=[
            {"method": "POST", "path": "x12/270", "body": _270, "content_type": "application/edi-x12"},
            {"method": "POST", "path": "x12/278", "body": _278, "content_type": "application/edi-x12"},
        ],
    ),
    "files": Surface(
        kind="files",
        data={"files": [{"path": "inbox/order.txt", "content": "order 42\n"}]},
        scenario=[
            {"step": "drop_file_inbox", "path": "inbox/request.json", "content": json.dumps(_REFERRAL)}
        ],
        criteria={
            "referral uploaded": {
                "assert": "sftp-file-present",
                "path": "outbox/referral.json",
                "parse_json": True,
                "fields": [{"path": "patient.member_id", "expected": "M123"}],
            },
            "order is there": {
                "assert": "sftp-file-present",
                "path": "inbox/order.txt",
                "include_seeded": True,
            },
            "no stray file": {
                "assert": "no-unexpected-changes",
                "surfaces": ["files"],
                "allow": [{"path": "outbox/*", "change": "created"}],
            },
        },
        idle_passes=["order is there", "no stray file"],
        gate="referral uploaded",
        actions=[
            {
                "method": "PUT",
                "path": "files/outbox/referral.json",
                "body": json.dumps(_REFERRAL),
                "content_type": "application/json",
            }
        ],
    ),
    "portal": Surface(
        kind="portal",
        data=PORTAL,
        criteria={
            "MRI approved": MRI_APPROVED,
            "patient on file": {
                "assert": "portal-state-match",
                "correlate_by": {"resource": "patients", "key": "member_id", "value": "M1001"},
                "assertions": [{"path": "name", "expected": "Ann Lee"}],
            },
            "only the request": {
                "assert": "no-unexpected-changes",
                "surfaces": ["portal"],
                "allow": [{"resource": "prior_auth_requests", "change": "created", "max": 1}],
            },
        },
        idle_passes=["patient on file", "only the request"],
        gate="MRI approved",
        actions=[{"method": "POST", "path": "portal/prior_auth_requests", "json": SUBMISSION}],
    ),
}


def _task(api: httpx.Client, surface: Surface) -> tuple[str, str, dict[str, str]]:
    dataset = make_dataset(api, surface.kind, surface.data)
    benchmark = ok(api.post("/benchmarks", json={"name": unique(f"self-test {surface.kind}")}), 201)
    body: Json = {
        "benchmark_id": benchmark["id"],
        "name": f"{surface.kind} task",
        "dataset_ids": [dataset["id"]],
        "reference": {"actions": surface.actions},
    }
    if surface.scenario:
        body["scenario"] = surface.scenario
    task = ok(api.post("/tasks", json=body), 201)
    ids = {}
    for label, assertion in surface.criteria.items():
        made = ok(
            api.post("/criteria", json={"task_id": task["id"], **criterion(assertion, label=label)}), 201
        )
        ids[label] = made["id"]
    return str(benchmark["id"]), str(task["id"]), ids


@pytest.mark.parametrize("name", list(SURFACES))
def test_idle_is_flagged_exactly_idle_ok_honoured_reference_passes(api: httpx.Client, name: str) -> None:
    surface = SURFACES[name]
    benchmark_id, task_id, ids = _task(api, surface)
    slug = unique(f"trust-{name}").replace(" ", "-")

    # publish runs the self-test and refuses, the report listing each flagged criterion's evidence
    refused = error(api.post(f"/benchmarks/{benchmark_id}/publish", json={"slug": slug}), 409, "CONFLICT")
    first = refused["self_tests"][task_id]
    idle_passed = [check["label"] for check in first["idle"]["checks"] if check["passed"]]
    flagged = [p["criterion"] for p in first["problems"] if p["kind"] == "passes_idle"]
    assert idle_passed == [c["label"] for c in flagged] == surface.idle_passes, first["problems"]
    assert all(c["passed"] is True and c["evidence"] is not None for c in flagged)
    assert [p["kind"] for p in first["problems"]] == ["passes_idle"] * len(flagged) + ["idle_score"]
    assert first["idle"]["score"] == len(flagged) / len(surface.criteria)
    reference = first["reference"]
    assert reference["score"] == 1 and reference["verdict"] == "pass", reference
    assert all(action["status"] < 400 for action in reference["actions"]), reference["actions"]

    for label in surface.idle_passes:
        ok(api.patch(f"/criteria/{ids[label]}", json={"idle_ok": True}))
    ok(api.patch(f"/criteria/{ids[surface.gate]}", json={"required": True}))
    fixed = ok(api.post(f"/tasks/{task_id}/self-test"))
    assert fixed["ok"] is True and fixed["problems"] == [], fixed["problems"]
    assert fixed["idle"]["score"] == 0 and fixed["reference"]["score"] == 1
    # the idle trial still passes those criteria; idle_ok only stops them being flagged, and the
    # failed required criterion zeroes the idle task run, naming itself
    assert [c["label"] for c in fixed["idle"]["checks"] if c["passed"]] == surface.idle_passes
    idle_run = ok(api.get(f"/task-runs/{fixed['idle']['task_run_id']}"))
    assert idle_run["score"] == 0 and idle_run["verdict"] == "fail"
    assert idle_run["gated_by"]["label"] == surface.gate
    assert idle_run["gated_by"]["ungated_score"] == len(flagged) / len(surface.criteria)
    published = ok(api.post(f"/benchmarks/{benchmark_id}/publish", json={"slug": slug}))
    assert published["slug"] == slug and published["version"] == 1
