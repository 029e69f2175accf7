"""Datasets (+ entities), environments, tasks (+ entities), solvers: CRUD, PATCH merge rules."""

from __future__ import annotations

import httpx

from tests.service.builders import PASSES, error, make_benchmark, make_dataset, ok, start_run, unique
from tests.service.conftest import Server

BUNDLE = {
    "resourceType": "Bundle",
    "type": "collection",
    "entry": [{"fullUrl": "urn:uuid:1", "resource": {"resourceType": "Patient", "id": "p1"}}],
}


def test_datasets_and_entities(api: httpx.Client) -> None:
    created = make_dataset(api, "fhir", BUNDLE, {"kind": "patient", "key": "p1", "data": {"id": "p1"}})
    assert created["id"].startswith("ds_") and created["entities"][0]["id"].startswith("ent_")
    entity = ok(
        api.post(f"/datasets/{created['id']}/entities", json={"kind": "referral", "data": {"n": 1}}), 201
    )
    listed = ok(api.get(f"/datasets/{created['id']}/entities"))["data"]
    assert [e["id"] for e in listed] == [entity["id"], created["entities"][0]["id"]]
    patched = ok(api.patch(f"/datasets/{created['id']}", json={"name": "renamed"}))
    assert patched["name"] == "renamed" and patched["data"] == BUNDLE
    assert "data.resourceType" in error(
        api.patch(f"/datasets/{created['id']}", json={"data": {"x": 1}}), 422, "VALIDATION_ERROR"
    )
    assert api.delete(f"/datasets/{created['id']}").status_code == 204
    error(api.get(f"/datasets/{created['id']}"), 404, "NOT_FOUND")


def test_environment_patch_merges_and_clears(api: httpx.Client) -> None:
    created = ok(
        api.post("/environments", json={"name": unique("env"), "description": "d", "settings": {"a": 1}}), 201
    )
    patched = ok(
        api.patch(f"/environments/{created['id']}", json={"description": None, "settings": {"b": 2}})
    )
    assert (
        patched["description"] is None
        and patched["settings"] == {"b": 2}
        and patched["name"] == created["name"]
    )
    error(api.patch(f"/environments/{created['id']}", json={"dataset_ids": ["ds_missing"]}), 404, "NOT_FOUND")


def test_task_entities_are_frozen_into_runs(server: Server, api: httpx.Client) -> None:
    dataset = make_dataset(api, "portal", {"resources": {}}, {"kind": "member", "data": {"member_id": "M9"}})
    entity_id = dataset["entities"][0]["id"]
    catalog = make_benchmark(api, [[]])
    task_id = catalog.task_ids[0]
    ok(api.post(f"/tasks/{task_id}/entities", json={"entity_id": entity_id}), 201)
    ok(api.post(f"/tasks/{task_id}/entities", json={"entity_id": entity_id}), 201)  # linking again: no-op
    assert [e["id"] for e in ok(api.get(f"/tasks/{task_id}/entities"))["data"]] == [entity_id]
    body = {"task_id": task_id, "label": "scoped", "assertion": PASSES, "input_entity_id": entity_id}
    assert ok(api.post("/criteria", json=body), 201)["input_entity_id"] == entity_id
    error(api.post("/criteria", json={**body, "input_entity_id": "ent_nope"}), 404, "NOT_FOUND")
    error(api.delete(f"/datasets/{dataset['id']}"), 409, "CONFLICT")
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    error(api.get(f"/task-runs/{task_run_id}/state"), 409, "CONFLICT")
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
        assert ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))["score"] == 1.0
    assert api.delete(f"/tasks/{task_id}/entities/{entity_id}").status_code == 204
    error(api.delete(f"/tasks/{task_id}/entities/{entity_id}"), 404, "NOT_FOUND")
    assert ok(api.get(f"/task-runs/{task_run_id}"))["snapshot"]["criteria"][0]["input_entity_id"] == entity_id


def test_solvers(api: httpx.Client) -> None:
    solver = ok(api.post("/solvers", json={"name": unique("s"), "description": "an agent"}), 201)
    patched = ok(api.patch(f"/solvers/{solver['id']}", json={"version": "2.0"}))
    assert (patched["version"], patched["description"]) == ("2.0", "an agent")
    assert solver["id"] in [s["id"] for s in ok(api.get("/solvers", params={"limit": 100}))["data"]]
    assert api.delete(f"/solvers/{solver['id']}").status_code == 204


def test_benchmark_without_tasks_runs_to_a_fail(api: httpx.Client) -> None:
    benchmark = ok(api.post("/benchmarks", json={"name": unique("empty")}), 201)
    run = start_run(api, benchmark["id"])
    summary = ok(api.get(f"/v1/benchmark-runs/{run.id}"))
    assert (summary["phase"], summary["score"], summary["verdict"], summary["task_runs"]) == (
        "completed",
        0.0,
        "fail",
        [],
    )


def test_x12_dataset_is_a_payer_definition_checked_key_by_key(api: httpx.Client) -> None:
    member = {"member_id": "M1", "first_name": "Ann", "last_name": "Lee"}
    body = {"name": unique("x12"), "type": "x12", "data": {"payer": {"id": "P1"}, "members": [member]}}
    details = error(api.post("/datasets", json=body), 422, "VALIDATION_ERROR")
    assert details == {"data.members.0.birth_date": ["missing required key 'birth_date'"]}
    created = make_dataset(
        api, "x12", {"payer": {"id": "P1"}, "members": [{**member, "birth_date": "1990-01-01"}]}
    )
    bad_rule = {
        "payer": {"id": "P1"},
        "authorization_rules": [{"procedure_code": "1", "determination": "yes"}],
    }
    assert "data.authorization_rules.0.determination" in error(
        api.patch(f"/datasets/{created['id']}", json={"data": bad_rule}), 422, "VALIDATION_ERROR"
    )
