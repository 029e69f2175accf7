"""Benchmark trust (issue 14) through the HTTP API: required criteria gate a task, repeated trials
report intervals and pass^k, two runs compare with a paired difference, and human overrides are
audited, recomputed at every level and survive `rescore` (or are marked stale)."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from assay.store.models import CriterionRun

from .builders import FAILS, PASSES, Json, criterion, error, make_benchmark, ok
from .conftest import Server


def _run(server: Server, api: httpx.Client, benchmark_id: str, trials: int = 1) -> Json:
    created = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id, "trials": trials}), 201)
    with server.client(created["bearer_token"]) as agent:
        for task_run in created["task_runs"]:
            ok(agent.post(task_run["start_url"]))
            ok(agent.post(task_run["complete_url"]))
    return ok(api.get(f"/benchmark-runs/{created['benchmark_run_id']}"))


def test_a_failed_required_criterion_zeroes_the_task(server: Server, api: httpx.Client) -> None:
    gate = {**criterion(FAILS, label="verified identity"), "required": True}
    catalog = make_benchmark(api, [[criterion(PASSES, weight=3), gate], [criterion(PASSES)]])
    assert catalog.criteria[1]["required"] is True and catalog.criteria[0]["required"] is False
    run = _run(server, api, catalog.benchmark_id)
    gated, clean = run["task_runs"]
    assert gated["score"] == 0 and gated["verdict"] == "fail"
    assert gated["gated_by"] == {"position": 1, "label": "verified identity", "ungated_score": 0.75}
    assert "gated_by" not in clean and clean["verdict"] == "pass"
    assert run["score"] == 0.5
    completion = ok(api.post(f"/task-runs/{gated['id']}/rescore"))
    assert completion["score"] == 0 and completion["gated_by"]["label"] == "verified identity"


def test_a_passed_required_criterion_does_not_gate(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[{**criterion(PASSES), "required": True}, criterion(FAILS)]])
    (task_run,) = _run(server, api, catalog.benchmark_id)["task_runs"]
    assert task_run["score"] == 0.5 and task_run["verdict"] == "partial" and "gated_by" not in task_run


def test_required_must_be_a_boolean(api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[]])
    body = {"task_id": catalog.task_ids[0], **criterion(PASSES), "required": "yes"}
    assert "required" in error(api.post("/criteria", json=body), 422, "VALIDATION_ERROR")


def test_trials_report_interval_and_pass_hat_k(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(PASSES)], [criterion(FAILS)]])
    run = _run(server, api, catalog.benchmark_id, trials=3)
    assert run["trials"] == 3 and len(run["task_runs"]) == 9
    assert [tr["trial"] for tr in run["task_runs"]] == [0, 1, 2] * 3
    stats = run["statistics"]
    assert stats["trials"] == 3 and stats["mean"] == round(2 / 3, 6)
    assert stats["pass_at_k"] == round(2 / 3, 6) and stats["pass_hat_k"] == round(2 / 3, 6)
    assert set(stats["consistency"].values()) == {1.0}
    low, high = stats["ci95"]
    assert 0 <= low <= 2 / 3 <= high <= 1 and low < high


def test_a_run_whose_tasks_all_pass_has_a_zero_width_interval(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(PASSES)]])
    stats = _run(server, api, catalog.benchmark_id, trials=2)["statistics"]
    assert stats["pass_hat_k"] == 1 and stats["pass_at_k"] == 1 and stats["ci95"] == [1.0, 1.0]


def test_compare_identical_runs_and_a_real_gap(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(FAILS)], [criterion(PASSES)]])
    a = _run(server, api, catalog.benchmark_id)
    b = _run(server, api, catalog.benchmark_id)
    same = ok(api.get("/benchmark-runs/compare", params={"a": a["id"], "b": b["id"]}))
    assert same["mean_difference"] == 0 and same["ci95"] == [0.0, 0.0] and same["exceeds_noise"] is False
    assert set(same["tasks"]) == set(catalog.task_ids)

    other = make_benchmark(api, [[criterion(FAILS)]])
    c = _run(server, api, other.benchmark_id)
    problem = error(
        api.get("/benchmark-runs/compare", params={"a": a["id"], "b": c["id"]}), 422, "VALIDATION_ERROR"
    )
    assert "b" in problem


def test_compare_finds_a_difference_beyond_noise(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(PASSES)], [criterion(PASSES)]])
    good = _run(server, api, catalog.benchmark_id)
    bad = _run(server, api, catalog.benchmark_id)
    # Three overrides turn every task of the second run into a failure.
    for task_run in bad["task_runs"]:
        detail = ok(api.get(f"/task-runs/{task_run['id']}"))
        crun = detail["criterion_runs"][0]["id"]
        ok(api.post(f"/criterion-runs/{crun}/override", json={"passed": False, "reason": "wrong patient"}))
    result = ok(api.get("/benchmark-runs/compare", params={"a": good["id"], "b": bad["id"]}))
    assert result["mean_difference"] == 1 and result["exceeds_noise"] is True


def test_override_is_audited_recomputed_and_survives_rescore(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES), criterion(FAILS, label="asked for member ID")]])
    run = _run(server, api, catalog.benchmark_id)
    task_run_id = run["task_runs"][0]["id"]
    assert run["score"] == 0.5
    failing = ok(api.get(f"/task-runs/{task_run_id}"))["criterion_runs"][1]
    body = {"passed": True, "reason": "the agent asked for it in other words"}
    overridden = ok(api.post(f"/criterion-runs/{failing['id']}/override", json=body))
    record = overridden["override"]
    assert overridden["passed"] is True and overridden["score"] == 1
    assert record["reason"] == body["reason"] and record["by"] and record["at"] and record["stale"] is False
    assert record["judged"]["passed"] is False
    task_run = ok(api.get(f"/task-runs/{task_run_id}"))
    assert task_run["score"] == 1 and task_run["verdict"] == "pass"
    assert task_run["criterion_runs"][1]["override"]["reason"] == body["reason"]
    summary = ok(api.get(f"/benchmark-runs/{run['id']}"))
    assert summary["score"] == 1 and summary["overrides"] == 1 and summary["task_runs"][0]["overrides"] == 1

    rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
    assert rescored["score"] == 1 and rescored["checks"][1]["override"]["stale"] is False
    assert ok(api.get(f"/benchmark-runs/{run['id']}"))["score"] == 1


def test_an_override_whose_judged_value_changed_is_kept_as_stale(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(FAILS)]])
    run = _run(server, api, catalog.benchmark_id)
    task_run_id = run["task_runs"][0]["id"]
    crun = ok(api.get(f"/task-runs/{task_run_id}"))["criterion_runs"][0]["id"]
    ok(api.post(f"/criterion-runs/{crun}/override", json={"passed": True, "reason": "checked by hand"}))
    # What the check read at override time differs from what it reads now (as after a capture or
    # check fix): the override must not silently apply to a different judgement.
    with server.database.transaction() as session:
        row = session.scalars(select(CriterionRun).where(CriterionRun.id == crun)).one()
        row.override = {**row.override, "judged": {**row.override["judged"], "evidence_sha256": "0" * 64}}
    rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
    check = rescored["checks"][0]
    assert check["override"]["stale"] is True and check["passed"] is False and rescored["score"] == 0
    assert check["override"]["reason"] == "checked by hand"


def test_overrides_need_an_org_key_of_the_same_org(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(FAILS)]])
    run = _run(server, api, catalog.benchmark_id)
    crun = ok(api.get(f"/task-runs/{run['task_runs'][0]['id']}"))["criterion_runs"][0]["id"]
    body = {"passed": True, "reason": "x"}
    with server.client(server.new_org_key()) as stranger:
        error(stranger.post(f"/criterion-runs/{crun}/override", json=body), 404, "NOT_FOUND")
    agent_run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    with server.client(agent_run["bearer_token"]) as agent:  # an agent's run token is no org key
        error(agent.post(f"/criterion-runs/{crun}/override", json=body), 403, "FORBIDDEN")
    problem = error(
        api.post(f"/criterion-runs/{crun}/override", json={"passed": True}), 422, "VALIDATION_ERROR"
    )
    assert "reason" in problem
    assert ok(api.get(f"/criterion-runs/{crun}"))["override"] is None


def test_trials_get_their_own_playgrounds_and_honour_concurrency(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES)]], concurrency=1)
    created = ok(
        api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id, "trials": 2}), 201
    )
    first, second = created["task_runs"]
    assert first["task_id"] == second["task_id"] and first["id"] != second["id"]
    with server.client(created["bearer_token"]) as agent:
        started = ok(agent.post(first["start_url"]))
        details = error(agent.post(second["start_url"]), 409, "CONFLICT")
        assert details["started_task_run_ids"] == [first["id"]]
        ok(agent.post(first["complete_url"]))
        again = ok(agent.post(second["start_url"]))
        ok(agent.post(second["complete_url"]))
    assert started["playground_id"] != again["playground_id"]
    assert started["credentials"] != again["credentials"]


def test_a_second_override_keeps_the_first_in_its_history(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(FAILS)]])
    run = _run(server, api, catalog.benchmark_id)
    crun = ok(api.get(f"/task-runs/{run['task_runs'][0]['id']}"))["criterion_runs"][0]["id"]
    colleague = ok(api.post("/api-keys", json={"name": "reviewer"}), 201)
    with server.client(colleague["key"]) as reviewer:
        first = ok(
            reviewer.post(f"/criterion-runs/{crun}/override", json={"passed": True, "reason": "said it"})
        )
    assert first["override"]["by"] == colleague["id"]
    second = ok(
        api.post(f"/criterion-runs/{crun}/override", json={"passed": False, "reason": "on review, no"})
    )
    record = second["override"]
    assert record["by"] != colleague["id"] and record["reason"] == "on review, no"
    assert [(h["by"], h["reason"], h["passed"]) for h in record["history"]] == [
        (colleague["id"], "said it", True)
    ]
    # what the check itself judged is kept from before the first override
    assert record["judged"] == first["override"]["judged"] and record["judged"]["passed"] is False
    assert ok(api.get(f"/benchmark-runs/{run['id']}"))["score"] == 0
