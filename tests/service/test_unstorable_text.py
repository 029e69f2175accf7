"""Text the database cannot store gets the same answer on SQLite and PostgreSQL (issue 9).

A NUL (U+0000) in a name was 201 on SQLite (stored) and 422 on PostgreSQL ("a value is too large",
empty `details`: psycopg refuses the insert); a lone surrogate was already refused everywhere. Now
both are refused where the body enters, 422 `VALIDATION_ERROR` naming the key, and a NUL in a path
or query parameter is 400 `BAD_REQUEST` naming the parameter, on both backends (`server` runs each
test on SQLite, and on PostgreSQL when `ASSAY_TEST_POSTGRES_URL` is set, as CI does).
"""

from __future__ import annotations

import json

import httpx

from assay.store.json_values import NUL_TEXT, not_strict_json, storable_json_problem, strict_json_problem
from tests.sandboxes.portal.world import MRI_APPROVED, start_portal_task

from .builders import error, make_benchmark, ok, unique
from .conftest import Server

SURROGATE = "a lone UTF-16 surrogate escape (\\ud800-\\udfff) is not Unicode text"


def _post_raw(api: httpx.Client, path: str, raw: str) -> httpx.Response:
    return api.post(path, content=raw.encode(), headers={"Content-Type": "application/json"})


def test_a_nul_in_a_name_is_a_422_naming_the_key(server: Server, api: httpx.Client) -> None:
    name = unique("nul")
    details = error(api.post("/benchmarks", json={"name": name + "\x00"}), 422, "VALIDATION_ERROR")
    assert details == {"name": [NUL_TEXT]}
    listed = ok(api.get("/benchmarks", params={"limit": 100}))["data"]
    assert not [b for b in listed if b["name"].startswith(name)]  # nothing stored, on either backend


def test_the_key_is_named_however_deep_and_in_keys_too(api: httpx.Client) -> None:
    body = {"name": unique("nul"), "type": "voice", "data": {"turns": [{"speaker": "ivr", "text": "a\x00"}]}}
    details = error(api.post("/datasets", json=body), 422, "VALIDATION_ERROR")
    assert details == {"data.turns.0.text": [NUL_TEXT]}
    keyed = {"name": unique("nul"), "type": "voice", "data": {"tur\x00ns": []}}
    assert error(api.post("/datasets", json=keyed), 422, "VALIDATION_ERROR") == {
        "data.tur\\x00ns": [NUL_TEXT]
    }


def test_patch_and_v1_bodies_are_checked_alike(api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[]])
    patched = api.patch(f"/benchmarks/{catalog.benchmark_id}", json={"description": "x\x00y"})
    assert error(patched, 422, "VALIDATION_ERROR") == {"description": [NUL_TEXT]}
    run = api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id, "agent": {"n": "\x00"}})
    assert error(run, 422, "VALIDATION_ERROR") == {"agent.n": [NUL_TEXT]}


def test_a_lone_surrogate_is_the_same_422(api: httpx.Client) -> None:
    response = _post_raw(api, "/benchmarks", '{"name": "a\\ud800b"}')
    assert error(response, 422, "VALIDATION_ERROR") == {"name": [SURROGATE]}


def test_a_nul_in_a_path_or_query_parameter_is_a_400_naming_it(api: httpx.Client) -> None:
    details = error(api.get("/benchmarks/bm%00x"), 400, "BAD_REQUEST")
    assert details == {"path.benchmark_id": [NUL_TEXT]}
    details = error(api.get("/criterion-runs", params={"task_run_id": "tr\x00"}), 400, "BAD_REQUEST")
    assert details == {"query.task_run_id": [NUL_TEXT]}


def test_sandbox_surfaces_refuse_a_nul_the_same_way(server: Server, api: httpx.Client) -> None:
    dataset = {"name": unique("voice"), "type": "voice", "data": {"turns": []}}
    dataset_id = ok(api.post("/datasets", json=dataset), 201)["id"]
    catalog = make_benchmark(api, [[]])
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"dataset_ids": [dataset_id]}))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(task_run["start_url"]))
        turns = started["endpoints"]["voice"] + "/turns"
        refused = agent.post(turns, json={"speaker": "agent", "text": "member\x00id"})
        assert error(refused, 422, "VALIDATION_ERROR") == {"text": [NUL_TEXT]}
        refused = agent.post(
            turns, json=[{"speaker": "agent", "text": "ok"}, {"speaker": "agent", "text": "\x00"}]
        )
        assert error(refused, 422, "VALIDATION_ERROR") == {"1.text": [NUL_TEXT]}
        assert ok(agent.get(turns))["data"] == []  # nothing half-stored
        unknown = agent.get("/v1/task-runs/tr%00/voice/turns")
        assert error(unknown, 400, "BAD_REQUEST") == {"path.task_run_id": [NUL_TEXT]}


def test_the_check_names_what_the_walk_names() -> None:
    assert storable_json_problem({"a": ["ok", {"b": "\x00"}]}) == ("a.1.b", NUL_TEXT)
    assert strict_json_problem({"a": "\x00"}) is None  # the FHIR surface stores NUL as `\u0000`
    assert storable_json_problem({"a": "a literal \\u0000 is fine"}) is None
    assert not_strict_json(json.loads('{"a": "\\u0000"}'), nul=True) == ("a", NUL_TEXT)
    assert storable_json_problem({"a": "Müller 😀", "b": [1.5, None]}) is None


def test_portal_rows_and_keys_with_a_nul(server: Server, api: httpx.Client) -> None:
    """A row key with a NUL is 404 (was 422 "too large" on PostgreSQL), a row value one 422."""
    started = start_portal_task(server, api, [MRI_APPROVED])
    with started.agent() as agent:
        error(agent.get(f"{started.portal}/patients/M%00"), 404, "NOT_FOUND")
        refused = agent.patch(f"{started.portal}/patients/M1001", json={"name": "A\x00"})
        assert error(refused, 422, "VALIDATION_ERROR") == {"name": [NUL_TEXT]}
