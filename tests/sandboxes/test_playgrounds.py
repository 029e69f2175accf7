"""Playgrounds through the service (SPEC §1.1, §5.2, §6): start seeds the FHIR store from the
datasets, an agent works over FHIR REST with its run token, complete scores the live store, the
state tar.gz verified offline gives the same score, and playgrounds never see each other.

Sample: Synthea's Liz Conn bundle (tests/fixtures/fhir/synthea/smart-2019, `urn:uuid` references).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fhirpy import SyncFHIRClient
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.sandboxes.registry import DATASET_TYPES
from tests.service.builders import error, ok, unique
from tests.service.conftest import Server

LIZ_FILE = Path(__file__).parents[1] / "fixtures" / "fhir" / "synthea" / "smart-2019"
LIZ_FILE = LIZ_FILE / "Liz_Conn_27c911c6-f045-4ffa-af5d-6eba57ac94b2.json"
LIZ = "ee9f8dd8-72d2-4769-8020-89e504b1504b"
Json = dict[str, Any]

BOOKED_WITH_RIVERA = {
    "assert": "fhir-resource-state",
    "resource_type": "Appointment",
    "search": {"patient": f"Patient/{LIZ}", "status": "booked"},
    "fields": [{"path": "participant.1.actor.display", "expected": "Dr. Rivera"}],
}
LIZ_STILL_THERE = {
    "assert": "fhir-resource-state",
    "resource_type": "Patient",
    "search": {"_id": LIZ},
    "fields": [{"path": "name.0.family", "expected": "Conn"}],
}


def _fhir_benchmark(
    api: httpx.Client, *, tasks: int = 1, concurrency: int = 1, publish: bool = False
) -> Json:
    """A benchmark whose environment loads Liz's bundle; its run created with the org key."""
    bundle = json.loads(LIZ_FILE.read_text())
    dataset = ok(api.post("/datasets", json={"name": unique("liz"), "type": "fhir", "data": bundle}), 201)
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [dataset["id"]]}), 201
    )
    benchmark = ok(
        api.post(
            "/benchmarks",
            json={"name": unique("fhir"), "environment_id": environment["id"], "concurrency": concurrency},
        ),
        201,
    )
    for i in range(tasks):
        task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": f"book {i}"}), 201)
        for label, assertion in (("booked", BOOKED_WITH_RIVERA), ("patient kept", LIZ_STILL_THERE)):
            body = {"task_id": task["id"], "label": label, "assertion": assertion}
            ok(api.post("/criteria", json=body), 201)
    if publish:
        # force: "patient kept" passes with an idle agent, which the self-test gate refuses
        slug = ok(api.post(f"/benchmarks/{benchmark['id']}/publish", json={"force": True}))["slug"]
        return ok(api.post("/v1/benchmark-runs", json={"benchmark": slug}), 201)
    return ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)


def _book(fhir: SyncFHIRClient) -> str:
    patient = fhir.resources("Patient").search(_id=LIZ).fetch_all()[0]
    appointment = fhir.resource(
        "Appointment",
        status="booked",
        participant=[
            {"actor": {"reference": f"Patient/{patient.id}"}, "status": "accepted"},
            {"actor": {"display": "Dr. Rivera"}, "status": "accepted"},
        ],
    )
    appointment.save()
    return str(appointment.id)


def test_agent_books_over_fhir_and_complete_scores_the_live_store(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    run = _fhir_benchmark(api, publish=True)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(task_run["start_url"]))
        base = server.url + started["endpoints"]["fhir"]
        assert started["endpoints"]["fhir"] == f"/v1/task-runs/{task_run['id']}/fhir"
        fhir = SyncFHIRClient(base, authorization=f"Bearer {run['bearer_token']}")
        appointment_id = _book(fhir)
        found = fhir.resources("Appointment").search(patient=f"Patient/{LIZ}", status="booked").fetch_all()
        assert [a.id for a in found] == [appointment_id]

        completed = ok(agent.post(task_run["complete_url"]))
        assert (completed["score"], completed["verdict"]) == (1.0, "pass")
        assert completed["checks"][0]["evidence"]["resource"] == f"Appointment/{appointment_id}"
        refused = agent.get(f"{base}/Patient/{LIZ}")
        assert refused.status_code == 409
        assert ok(agent.post(task_run["complete_url"]))["score"] == 1.0

    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [(e["method"], e["status"]) for e in events] == [("GET", 200), ("POST", 201), ("GET", 200)]
    assert events[1]["type"] == "fhir_request" and events[1]["request"]["resourceType"] == "Appointment"
    assert events[1]["response"]["id"] == appointment_id and events[1]["truncated"] is False
    sandbox_events = ok(api.get(f"/sandboxes/{events[0]['sandbox_id']}/events"))["data"]
    assert [e["id"] for e in sandbox_events] == [e["id"] for e in events]

    rescored = ok(api.post(f"/task-runs/{task_run['id']}/rescore"))
    assert rescored["score"] == 1.0

    state = api.get(f"/task-runs/{task_run['id']}/state")
    assert state.status_code == 200
    (tmp_path / "state.tar.gz").write_bytes(state.content)
    task = ok(api.get(f"/task-runs/{task_run['id']}"))
    (tmp_path / "task.json").write_text(json.dumps(task["snapshot"]))
    offline = CliRunner().invoke(
        cli, ["verify", str(tmp_path / "task.json"), str(tmp_path / "state.tar.gz"), "--json"]
    )
    assert offline.exit_code == 0, offline.output
    result = json.loads(offline.output)
    assert (result["score"], result["verdict"]) == (1.0, "pass")
    assert [c["evidence"] for c in result["criterion_runs"]] == [c["evidence"] for c in completed["checks"]]


def test_without_the_booking_the_criterion_fails(server: Server, api: httpx.Client) -> None:
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        ok(agent.post(task_run["start_url"]))
        completed = ok(agent.post(task_run["complete_url"]))
    assert completed["score"] == 0.5
    assert [c["passed"] for c in completed["checks"]] == [False, True]


def _conflict(response: httpx.Response) -> str:
    """The diagnostics of a FHIR route's 409 OperationOutcome."""
    assert response.status_code == 409, response.text
    assert response.headers["content-type"] == "application/fhir+json"
    outcome = response.json()
    assert outcome["resourceType"] == "OperationOutcome" and outcome["issue"][0]["code"] == "conflict"
    return str(outcome["issue"][0]["diagnostics"])


def test_playgrounds_of_one_dataset_are_isolated(server: Server, api: httpx.Client) -> None:
    run = _fhir_benchmark(api, tasks=2, concurrency=2)
    first, second = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        bases = [server.url + ok(agent.post(tr["start_url"]))["endpoints"]["fhir"] for tr in (first, second)]
        one = SyncFHIRClient(bases[0], authorization=f"Bearer {run['bearer_token']}")
        two = SyncFHIRClient(bases[1], authorization=f"Bearer {run['bearer_token']}")
        _book(one)
        liz = one.resources("Patient").search(_id=LIZ).fetch_all()[0]
        liz["gender"] = "other"
        liz.save()

        assert two.resources("Appointment").fetch_all() == []
        assert two.resources("Patient").search(_id=LIZ).fetch_all()[0]["gender"] == "female"
        routed = agent.get(f"/v1/benchmark-runs/{run['benchmark_run_id']}/fhir/Patient")
        diagnostics = _conflict(routed)  # an OperationOutcome, like every FHIR error
        assert first["id"] in diagnostics and second["id"] in diagnostics

        scores = [ok(agent.post(tr["complete_url"]))["score"] for tr in (first, second)]
    assert scores == [1.0, 0.5]


def test_the_benchmark_run_base_routes_to_its_started_task_run(server: Server, api: httpx.Client) -> None:
    run = _fhir_benchmark(api, tasks=2)
    first = run["task_runs"][0]
    base = f"/v1/benchmark-runs/{run['benchmark_run_id']}/fhir"
    with server.client(run["bearer_token"]) as agent:
        assert _conflict(agent.get(f"{base}/Patient")).endswith("started: none")
        ok(agent.post(first["start_url"]))
        created = agent.post(
            f"{base}/Appointment", json={"resourceType": "Appointment", "status": "booked", "participant": []}
        )
        assert created.status_code == 201
        assert created.headers["location"].startswith(f"{server.url}{base}/Appointment/")
        direct = agent.get(f"/v1/task-runs/{first['id']}/fhir/Appointment/{created.json()['id']}")
        assert direct.status_code == 200
    with server.client() as org:
        assert org.get(f"{base}/Patient").status_code == 403
    other = _fhir_benchmark(api)
    with server.client(other["bearer_token"]) as stranger:
        assert stranger.get(f"{base}/Patient").status_code == 404
        assert stranger.get(f"/v1/task-runs/{first['id']}/fhir/Patient").status_code == 404


def dataset_run(api: httpx.Client, kind: str, data: Any) -> Json:
    """A run of a one-task benchmark (no criteria) whose environment loads one dataset."""
    dataset = ok(api.post("/datasets", json={"name": unique(kind), "type": kind, "data": data}), 201)
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [dataset["id"]]}), 201
    )
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique(kind), "environment_id": environment["id"]}), 201
    )
    ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "one"}), 201)
    return ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)


def test_a_dataset_type_without_a_loader_fails_the_start(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = dataset_run(api, "voice", {"turns": []})
    # Stored while its surface was registered; the surface is gone when the run starts.
    monkeypatch.delitem(DATASET_TYPES, "voice")
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        details = error(agent.post(task_run["start_url"]), 409, "CONFLICT")
    assert details["reason"] == "dataset type voice is not supported"
    assert ok(api.get(f"/task-runs/{task_run['id']}"))["status"] == "failed"


def test_large_bodies_are_logged_truncated(server: Server, api: httpx.Client) -> None:
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        big = {"resourceType": "Basic", "code": {"text": "x" * (1024 * 1024 + 10)}}
        assert agent.post(f"{base}/Basic", json=big).status_code == 201
    [event] = ok(api.get(f"/task-runs/{task_run['id']}/events"))["data"]
    assert event["truncated"] is True
    assert isinstance(event["request"], str) and len(event["request"].encode()) <= 1024 * 1024


def test_a_refused_deeply_nested_body_is_logged_as_text(server: Server, api: httpx.Client) -> None:
    """The surface answers 400 past the nesting limit; the event keeps that body as text, so listing
    the events never has to serialize (or store) a 900-level JSON value."""
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    deep = '{"resourceType": "Patient", "extension": ' + "[" * 900 + "]" * 900 + "}"
    with server.client(run["bearer_token"]) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        refused = agent.post(
            f"{base}/Patient", content=deep, headers={"Content-Type": "application/fhir+json"}
        )
        assert refused.status_code == 400
    [event] = ok(api.get(f"/task-runs/{task_run['id']}/events"))["data"]
    assert (event["status"], event["request"], event["truncated"]) == (400, deep, False)


def test_concurrent_requests_each_get_one_event(server: Server, api: httpx.Client) -> None:
    """Requests racing on one sandbox all answer and each appends exactly one event, `seq` 1..n
    (on PostgreSQL concurrent appends contend for the next `seq`)."""
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(lambda _: agent.get(f"{base}/Patient/{LIZ}").status_code, range(48)))
    assert statuses == [200] * 48
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    assert sorted(e["seq"] for e in events) == list(range(1, 49))
