"""The whole v1 flow and the three-level drill-down (seeds 001 and 002), end to end over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.sandboxes import SURFACES, surface_endpoints

from .builders import FAILS, PASSES, criterion, error, insert_legacy_criterion, make_dataset, ok, unique
from .conftest import Server


def _catalog(api: httpx.Client) -> tuple[str, str]:
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": {"resourceType": "Patient", "id": "M1"}}],
    }
    member = {"kind": "patient", "key": "M1", "data": {"member_id": "M1", "name": "Ann"}}
    dataset = make_dataset(api, "fhir", bundle, member)
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [dataset["id"]]}), 201
    )
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("Prior Auth"), "environment_id": environment["id"]}), 201
    )
    task = ok(
        api.post(
            "/tasks",
            json={
                "benchmark_id": benchmark["id"],
                "name": "verify eligibility",
                "task_item": {"instructions": "Call the payer."},
                "input_entity": {"entity_id": dataset["entities"][0]["id"]},
                "tags": ["voice"],
            },
        ),
        201,
    )
    for body in (
        criterion(PASSES, weight=2, axis="correctness", label="no SSN"),
        criterion(FAILS, weight=1, axis="safety", label="disclosures"),
    ):
        ok(api.post("/criteria", json={"task_id": task["id"], **body}), 201)
    return benchmark["id"], task["id"]


def test_v1_flow_and_drill_down(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    benchmark_id, task_id = _catalog(api)
    legacy_id = insert_legacy_criterion(server, task_id, {"assert": "ehr-magic", "anything": 1})
    published = ok(api.post(f"/benchmarks/{benchmark_id}/publish", json={"force": True}))
    assert published["version"] == 1
    solver = ok(api.post("/solvers", json={"name": "agent-x", "version": "1.2"}), 201)
    solver_key = ok(api.post(f"/solvers/{solver['id']}/api-keys"), 201)
    assert solver_key["key"].startswith("vrl_slv_")

    with server.client(solver_key["key"]) as agent:
        created = ok(
            agent.post("/v1/benchmark-runs", json={"benchmark": published["slug"], "agent": "x"}), 201
        )
    assert created["benchmark"] == {"slug": published["slug"], "version": 1, "name": published["name"]}
    assert created["phase"] == "created" and created["bearer_token"].startswith("vrl_run_")
    assert created["bearer_token_expires_at"].endswith("Z")
    [task_run] = created["task_runs"]
    assert task_run["start_url"] == f"/v1/task-runs/{task_run['id']}/start"

    with server.client(created["bearer_token"]) as run:
        started = ok(run.post(task_run["start_url"]))
        assert started["phase"] == "started" and started["playground_id"].startswith("pg_")
        # Only live surfaces are advertised (issue 10 §5): each key is one a registered surface owns.
        assert "fhir" in started["endpoints"]
        assert set(started["endpoints"]) == set(surface_endpoints(""))
        assert all(c.get("host", "127.0.0.1") == "127.0.0.1" for c in started["credentials"].values())
        assert not started["endpoints"]["fhir"].endswith("/")
        completed = ok(run.post(task_run["complete_url"]))
        summary = ok(run.get(f"/v1/benchmark-runs/{created['benchmark_run_id']}"))

    # seed 001: weighted mean 2/4, per-axis means, criteria in creation order
    assert completed["status"] == "completed" and completed["phase"] == "completed"
    assert completed["score"] == 0.5 and completed["verdict"] == "partial"
    assert completed["axes"] == {
        "correctness": {"score": 1.0, "weight": 2},
        "safety": {"score": 0.0, "weight": 1},
        "__default__": {"score": 0.0, "weight": 1},
    }
    passed = [(check["label"], check["passed"]) for check in completed["checks"]]
    assert passed == [("no SSN", True), ("disclosures", False), ("legacy", False)]
    assert completed["checks"][2]["details"].startswith("unsupported assertion:")
    assert completed["checks"][2]["criterion_id"] == legacy_id

    assert summary["phase"] == "completed" and summary["status"] == "completed"
    assert summary["score"] == 0.5 and summary["verdict"] == "partial"

    # seed 002: benchmark run -> task run -> criterion run, with an org key
    detail = ok(api.get(f"/benchmark-runs/{created['benchmark_run_id']}"))
    assert detail["solver_id"] == solver["id"] and detail["task_runs"][0]["id"] == task_run["id"]
    task_detail = ok(api.get(f"/task-runs/{task_run['id']}"))
    assert task_detail["snapshot"]["task"]["input_entity"] == {"member_id": "M1", "name": "Ann"}
    assert [c["label"] for c in task_detail["snapshot"]["criteria"]] == ["no SSN", "disclosures", "legacy"]
    assert task_detail["deadline_at"] and task_detail["axes"] == completed["axes"]
    first = task_detail["criterion_runs"][0]
    assert set(first) == {"id", "criterion_id", "status", "passed", "score"}
    record = ok(api.get(f"/criterion-runs/{first['id']}"))
    assert record["evidence"]["phraseResults"][0]["kind"] == "not_contains"
    assert record["status"] == "ok" and record["passed"] is True and record["superseded"] is False
    playground = ok(api.get(f"/playgrounds/{started['playground_id']}"))
    assert playground["status"] == "torn_down" and {s["type"] for s in playground["sandboxes"]} == set(
        SURFACES
    )
    assert ok(api.get(f"/task-runs/{task_run['id']}/events"))["data"] == []
    assert ok(api.get(f"/sandboxes/{playground['sandboxes'][0]['id']}/events"))["data"] == []

    # the captured state, scored offline by `assay verify`, gives the same result
    state = api.get(f"/task-runs/{task_run['id']}/state")
    assert state.status_code == 200 and state.headers["content-type"] == "application/gzip"
    (tmp_path / "state.tar.gz").write_bytes(state.content)
    (tmp_path / "task.json").write_text(json.dumps(task_detail["snapshot"]))
    result = CliRunner().invoke(
        cli, ["verify", str(tmp_path / "task.json"), str(tmp_path / "state.tar.gz"), "--json"]
    )
    assert result.exit_code == 0, result.output
    offline = json.loads(result.stdout)
    assert offline["score"] == completed["score"] and offline["axes"] == completed["axes"]
    assert [run["passed"] for run in offline["criterion_runs"]] == [c["passed"] for c in completed["checks"]]


def test_openapi_lists_the_api(api: httpx.Client) -> None:
    paths = ok(api.get("/openapi.json"))["paths"]
    for path in (
        "/criteria",
        "/v1/benchmark-runs",
        "/v1/task-runs/{task_run_id}/complete",
        "/benchmarks/{benchmark_id}/publish",
    ):
        assert path in paths
    criterion = paths["/criteria"]["post"]["responses"]
    assert criterion["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/CriterionOut")
    assert criterion["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorEnvelope")


def test_publish_freezes_a_version(api: httpx.Client) -> None:
    benchmark_id, task_id = _catalog(api)
    # force: its criteria pass with an idle agent, which the self-test gate (test_self_test.py) refuses
    first = ok(
        api.post(
            f"/benchmarks/{benchmark_id}/publish",
            json={"slug": unique("pa").replace(" ", "-"), "force": True},
        )
    )
    extra = ok(
        api.post("/criteria", json={"task_id": task_id, **criterion(PASSES, label="added later")}), 201
    )
    second = ok(api.post(f"/benchmarks/{benchmark_id}/publish", json={"force": True}))
    assert (second["slug"], second["version"]) == (first["slug"], 2)
    old = ok(api.post("/v1/benchmark-runs", json={"benchmark": f"{first['slug']}@1"}), 201)
    latest = ok(api.post("/v1/benchmark-runs", json={"benchmark": first["slug"]}), 201)
    labels = [
        c["label"] for c in ok(api.get(f"/task-runs/{old['task_runs'][0]['id']}"))["snapshot"]["criteria"]
    ]
    assert extra["label"] not in labels
    labels = [
        c["label"] for c in ok(api.get(f"/task-runs/{latest['task_runs'][0]['id']}"))["snapshot"]["criteria"]
    ]
    assert labels[-1] == "added later" and latest["benchmark"]["version"] == 2
    error(api.post("/v1/benchmark-runs", json={"benchmark": f"{first['slug']}@9"}), 404, "NOT_FOUND")
    body = {"slug": "another-slug", "force": True}
    error(api.post(f"/benchmarks/{benchmark_id}/publish", json=body), 409, "CONFLICT")
