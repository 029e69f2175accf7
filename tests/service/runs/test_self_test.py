"""Task self-tests and the publish gate (issue 14), through the HTTP API: an idle agent is flagged on
exactly the criteria it passes, a reference solution replayed on a fresh playground must pass every
criterion, and `publish` refuses (listing criteria with evidence) until the task is fixed or forced."""

from __future__ import annotations

import httpx

from tests.service.builders import FAILS, FHIR_BOOKED, PASSES, criterion, error, make_benchmark, ok, unique
from tests.service.conftest import Server


def _appointment(doctor: str) -> dict:
    return {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [
            {"actor": {"display": doctor}, "status": "accepted"},
            {"actor": {"reference": "Patient/john-smith"}, "status": "accepted"},
        ],
    }


def _reference(doctor: str) -> dict:
    return {"actions": [{"method": "POST", "path": "fhir/Appointment", "json": _appointment(doctor)}]}


def test_an_idle_agent_is_flagged_on_exactly_the_criteria_it_passes(api: httpx.Client) -> None:
    catalog = make_benchmark(
        api,
        [
            [
                criterion(PASSES, label="never asked for the SSN"),
                criterion(FAILS),
                criterion(FHIR_BOOKED, label="booked"),
            ]
        ],
    )
    result = ok(api.post(f"/tasks/{catalog.task_ids[0]}/self-test"))
    assert result["ok"] is False and result["reference"] is None
    kinds = [(p["kind"], p.get("criterion", {}).get("label")) for p in result["problems"]]
    assert kinds == [("passes_idle", "never asked for the SSN"), ("idle_score", None)]
    flagged = result["problems"][0]["criterion"]
    assert flagged["passed"] is True and flagged["evidence"]["phraseResults"][0]["found"] is False
    assert result["idle"]["score"] == 1 / 3 and result["idle"]["verdict"] == "partial"


def test_idle_ok_and_a_required_gate_make_a_clean_task(api: httpx.Client) -> None:
    safety = {**criterion(PASSES, label="never asked for the SSN"), "idle_ok": True}
    gate = {**criterion(FHIR_BOOKED, label="booked"), "required": True}
    catalog = make_benchmark(api, [[safety, gate]])
    result = ok(api.post(f"/tasks/{catalog.task_ids[0]}/self-test"))
    assert result["ok"] is True and result["problems"] == [] and result["idle"]["score"] == 0


def test_a_reference_solution_must_pass_every_criterion(api: httpx.Client) -> None:
    gate = {**criterion(FHIR_BOOKED, label="booked with Dr. Rivera"), "required": True}
    catalog = make_benchmark(api, [[gate]])
    task_id = catalog.task_ids[0]
    ok(api.patch(f"/tasks/{task_id}", json={"reference": _reference("Dr. Rivera")}))
    assert ok(api.get(f"/tasks/{task_id}"))["reference"]["actions"][0]["json"]["status"] == "booked"
    good = ok(api.post(f"/tasks/{task_id}/self-test"))
    assert good["ok"] is True and good["reference"]["score"] == 1
    assert good["reference"]["actions"] == [
        {"position": 0, "method": "POST", "path": "fhir/Appointment", "status": 201}
    ]

    ok(api.patch(f"/tasks/{task_id}", json={"reference": _reference("Dr. Lee")}))
    bad = ok(api.post(f"/tasks/{task_id}/self-test"))
    (problem,) = bad["problems"]
    assert problem["kind"] == "reference_fails" and problem["criterion"]["label"] == "booked with Dr. Rivera"
    field = problem["criterion"]["evidence"]["fieldResults"][0]
    assert field["expected"] == "Dr. Rivera" and field["actual"] == "Dr. Lee"


def test_a_reference_path_may_not_escape_the_task_run(api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(FHIR_BOOKED)]])
    for path in ("../../benchmarks", "/tasks", "fhir/../../x"):
        body = {"reference": {"actions": [{"method": "GET", "path": path}]}}
        error(api.patch(f"/tasks/{catalog.task_ids[0]}", json=body), 422, "VALIDATION_ERROR")


def test_publish_refuses_then_accepts_with_the_fix(api: httpx.Client) -> None:
    catalog = make_benchmark(
        api, [[criterion(PASSES, label="never asked for the SSN"), criterion(FHIR_BOOKED)]]
    )
    slug = unique("trust").replace(" ", "-")
    refused = error(
        api.post(f"/benchmarks/{catalog.benchmark_id}/publish", json={"slug": slug}), 409, "CONFLICT"
    )
    report = refused["self_tests"][catalog.task_ids[0]]
    assert [p["kind"] for p in report["problems"]] == ["passes_idle", "idle_score"]
    assert report["problems"][0]["criterion"]["evidence"]
    safety, booking = catalog.criteria
    ok(api.patch(f"/criteria/{safety['id']}", json={"idle_ok": True}))
    ok(api.patch(f"/criteria/{booking['id']}", json={"required": True}))
    published = ok(api.post(f"/benchmarks/{catalog.benchmark_id}/publish", json={"slug": slug}))
    assert published["slug"] == slug and published["version"] == 1


def test_publish_with_force_skips_the_self_tests(api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]])
    published = ok(api.post(f"/benchmarks/{catalog.benchmark_id}/publish", json={"force": True}))
    assert published["version"] == 1


def test_self_test_is_for_org_keys_of_the_same_org(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(FHIR_BOOKED)]])
    with server.client(server.new_org_key()) as stranger:
        error(stranger.post(f"/tasks/{catalog.task_ids[0]}/self-test"), 404, "NOT_FOUND")
        error(stranger.post(f"/benchmarks/{catalog.benchmark_id}/publish", json={}), 404, "NOT_FOUND")
    with httpx.Client(base_url=server.url) as anonymous:
        error(anonymous.post(f"/tasks/{catalog.task_ids[0]}/self-test"), 401, "UNAUTHORIZED")
