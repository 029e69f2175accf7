"""Tenant and token scope (SPEC §5): another org's ids are 404s, never hints; run tokens reach only
their own run and never the rubric; Solver keys read only their solver's runs."""

from __future__ import annotations

import httpx

from .builders import PASSES, criterion, error, make_benchmark, make_dataset, ok, start_run, unique
from .conftest import Server


def test_org_b_sees_nothing_of_org_a(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    dataset = make_dataset(api, "voice", {"turns": []}, {"kind": "caller", "data": {}})
    environment = ok(api.post("/environments", json={"name": unique("e")}), 201)
    solver = ok(api.post("/solvers", json={"name": unique("s")}), 201)
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        playground_id = ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))["playground_id"]
        ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    criterion_run_id = ok(api.get(f"/task-runs/{task_run_id}"))["criterion_runs"][0]["id"]

    paths = [
        f"/datasets/{dataset['id']}",
        f"/datasets/{dataset['id']}/entities",
        f"/environments/{environment['id']}",
        f"/benchmarks/{catalog.benchmark_id}",
        f"/tasks/{catalog.task_ids[0]}",
        f"/tasks/{catalog.task_ids[0]}/entities",
        f"/criteria/{catalog.criteria[0]['id']}",
        f"/solvers/{solver['id']}",
        f"/benchmark-runs/{run.id}",
        f"/v1/benchmark-runs/{run.id}",
        f"/task-runs/{task_run_id}",
        f"/task-runs/{task_run_id}/state",
        f"/task-runs/{task_run_id}/events",
        f"/criterion-runs/{criterion_run_id}",
        f"/playgrounds/{playground_id}",
    ]
    with server.client(server.new_org_key()) as other:
        for path in paths:
            error(other.get(path), 404, "NOT_FOUND")
        for path in paths[:9]:
            if "entities" not in path and "runs" not in path:
                error(other.patch(path, json={"name": "mine now"}), 404, "NOT_FOUND")
                error(other.delete(path), 404, "NOT_FOUND")
        error(other.delete(f"/criteria/{catalog.criteria[0]['id']}"), 404, "NOT_FOUND")
        error(other.post(f"/benchmarks/{catalog.benchmark_id}/publish"), 404, "NOT_FOUND")
        error(other.post(f"/task-runs/{task_run_id}/rescore"), 404, "NOT_FOUND")
        error(other.post(f"/benchmark-runs/{run.id}/cancel"), 404, "NOT_FOUND")
        error(
            other.post("/criteria", json={"task_id": catalog.task_ids[0], "label": "x", "assertion": PASSES}),
            404,
            "NOT_FOUND",
        )
        error(other.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 404, "NOT_FOUND")
        for listing in (
            "/criteria",
            "/tasks",
            "/benchmarks",
            "/datasets",
            "/benchmark-runs",
            "/task-runs",
            "/criterion-runs",
            "/solvers",
        ):
            assert ok(other.get(listing))["data"] == [], listing
    assert ok(api.get(f"/criteria/{catalog.criteria[0]['id']}"))["label"] == catalog.criteria[0]["label"]


def test_run_token_scope(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    mine, theirs = start_run(api, catalog.benchmark_id), start_run(api, catalog.benchmark_id)
    with server.client(mine.token) as agent:
        for path in (
            "/criteria",
            f"/criteria/{catalog.criteria[0]['id']}",
            f"/task-runs/{mine.task_runs[0]['id']}",
            "/criterion-runs",
            f"/task-runs/{mine.task_runs[0]['id']}/state",
            "/benchmarks",
        ):
            error(agent.get(path), 403, "FORBIDDEN")
        error(agent.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 403, "FORBIDDEN")
        error(agent.get(f"/v1/benchmark-runs/{theirs.id}"), 404, "NOT_FOUND")
        error(agent.post(f"/v1/task-runs/{theirs.task_runs[0]['id']}/start"), 404, "NOT_FOUND")
        error(agent.post(f"/v1/task-runs/{theirs.task_runs[0]['id']}/complete"), 404, "NOT_FOUND")
        assert ok(agent.get(f"/v1/benchmark-runs/{mine.id}"))["benchmark_run_id"] == mine.id
    error(api.post(f"/v1/task-runs/{mine.task_runs[0]['id']}/start"), 403, "FORBIDDEN")


def test_solver_key_scope(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    keys = []
    for _ in range(2):
        solver = ok(api.post("/solvers", json={"name": unique("s")}), 201)
        keys.append(ok(api.post(f"/solvers/{solver['id']}/api-keys"), 201))
    with server.client(keys[0]["key"]) as first, server.client(keys[1]["key"]) as second:
        created = ok(first.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
        assert ok(first.get(f"/v1/benchmark-runs/{created['benchmark_run_id']}"))["phase"] == "created"
        error(second.get(f"/v1/benchmark-runs/{created['benchmark_run_id']}"), 404, "NOT_FOUND")
        error(first.get("/criteria"), 403, "FORBIDDEN")
        error(first.get(f"/benchmark-runs/{created['benchmark_run_id']}"), 403, "FORBIDDEN")
    assert ok(api.get(f"/v1/benchmark-runs/{created['benchmark_run_id']}"))["benchmark_run_id"]
    solver_id = ok(api.get(f"/benchmark-runs/{created['benchmark_run_id']}"))["solver_id"]
    assert api.delete(f"/solvers/{solver_id}/api-keys/{keys[0]['id']}").status_code == 204
    with server.client(keys[0]["key"]) as revoked:
        error(revoked.get(f"/v1/benchmark-runs/{created['benchmark_run_id']}"), 401, "UNAUTHORIZED")


def test_org_keys(server: Server, api: httpx.Client) -> None:
    created = ok(api.post("/api-keys", json={"name": "ci"}), 201)
    assert created["key"].startswith("vk_") and created["key"].endswith(created["suffix"])
    listed = ok(api.get("/api-keys"))["data"]
    assert created["id"] in [key["id"] for key in listed] and all("key" not in key for key in listed)
    with server.client(created["key"]) as client:
        ok(client.get("/benchmarks"))
    assert api.delete(f"/api-keys/{created['id']}").status_code == 204
    with server.client(created["key"]) as client:
        error(client.get("/benchmarks"), 401, "UNAUTHORIZED")
