"""`no-unexpected-changes` end to end over HTTP: a seeded FHIR dataset, the agent's REST writes,
`complete`, `rescore`, and `GET /task-runs/{id}/state` scored offline by `assay verify` (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli

from .builders import criterion, make_dataset, ok, start_run, unique
from .conftest import Server

FHIR = "application/fhir+json"
ALLOW_ALICE_APPOINTMENT = {
    "assert": "no-unexpected-changes",
    "allow": [{"resourceType": "Appointment", "change": "created", "search": {"patient": "Patient/alice"}}],
}


def _benchmark(api: httpx.Client) -> str:
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": {"resourceType": "Patient", "id": "alice", "name": [{"family": "Adams"}]}},
            {"resource": {"resourceType": "Patient", "id": "bob", "name": [{"family": "Brown"}]}},
        ],
    }
    dataset = make_dataset(api, "fhir", bundle)
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [dataset["id"]]}), 201
    )
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("book"), "environment_id": environment["id"]}), 201
    )
    task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "book alice"}), 201)
    ok(api.post("/criteria", json={"task_id": task["id"], **criterion(ALLOW_ALICE_APPOINTMENT)}), 201)
    return str(benchmark["id"])


def _book(fhir: httpx.Client, base: str) -> None:
    appointment = {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [{"actor": {"reference": "Patient/alice"}, "status": "accepted"}],
    }
    response = fhir.post(
        f"{base}/Appointment", content=json.dumps(appointment), headers={"content-type": FHIR}
    )
    assert response.status_code == 201, response.text


def _run(
    server: Server, api: httpx.Client, benchmark_id: str, tmp_path: Path, *, edit_bob: bool
) -> dict[str, Any]:
    run = start_run(api, benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        started = ok(agent.post(task_run["start_url"]))
        base = started["endpoints"]["fhir"]
        _book(agent, base)
        if edit_bob:
            bob = ok(agent.get(f"{base}/Patient/bob"))
            bob["name"] = [{"family": "Brown-Edited"}]
            edited = agent.put(f"{base}/Patient/bob", content=json.dumps(bob), headers={"content-type": FHIR})
            assert edited.status_code == 200, edited.text
        completed = ok(agent.post(task_run["complete_url"]))
    [live] = completed["checks"]
    rescored = ok(api.post(f"/task-runs/{task_run['id']}/rescore", json={}))
    detail = ok(api.get(f"/task-runs/{task_run['id']}"))
    record = ok(api.get(f"/criterion-runs/{detail['criterion_runs'][0]['id']}"))

    state = api.get(f"/task-runs/{task_run['id']}/state")
    assert state.status_code == 200
    folder = tmp_path / task_run["id"]
    folder.mkdir()
    (folder / "state.tar.gz").write_bytes(state.content)
    (folder / "task.json").write_text(json.dumps(detail["snapshot"]))
    result = CliRunner().invoke(
        cli, ["verify", str(folder / "task.json"), str(folder / "state.tar.gz"), "--json"]
    )
    offline = json.loads(result.stdout)
    [offline_run] = offline["criterion_runs"]
    assert offline["score"] == completed["score"] == rescored["score"]
    assert offline_run["passed"] == live["passed"]
    assert offline_run["evidence"]["unexpected"] == record["evidence"]["unexpected"]
    return {"live": live, "record": record, "offline": offline_run, "exit": result.exit_code}


def test_wrong_patient_fails_and_allowed_create_passes(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    benchmark_id = _benchmark(api)

    wrong = _run(server, api, benchmark_id, tmp_path, edit_bob=True)
    assert wrong["live"]["passed"] is False and wrong["record"]["status"] == "ok"
    assert wrong["record"]["evidence"]["unexpected"] == [
        {"surface": "fhir", "key": "Patient/bob", "change": "updated", "allowed": None}
    ]
    created = [c for c in wrong["record"]["evidence"]["changes"] if c["change"] == "created"]
    assert len(created) == 1 and created[0]["key"].startswith("Appointment/") and created[0]["allowed"] == 0

    right = _run(server, api, benchmark_id, tmp_path, edit_bob=False)
    assert right["live"]["passed"] is True and right["offline"]["passed"] is True, right
    assert right["exit"] == 0
    assert [c["change"] for c in right["record"]["evidence"]["changes"]] == ["created"]
