"""`natural-language` criteria through the HTTP API (SPEC §8, issue 13): stored exactly as sent,
422 by key when malformed, and with no judge configured recorded as unsupported."""

from __future__ import annotations

import httpx

from .builders import criterion, error, make_benchmark, ok, start_run
from .conftest import Server

EVAL = {"assert": "natural-language", "text": "The agent verified the caller's date of birth."}


def test_created_as_sent_and_malformed_is_422(api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(EVAL)]])
    assert catalog.criteria[0]["assertion"] == EVAL
    bad = {
        "task_id": catalog.task_ids[0],
        "label": "dob",
        "assertion": {"assert": "natural-language", "text": ""},
    }
    details = error(api.post("/criteria", json=bad), 422, "VALIDATION_ERROR")
    assert list(details) == ["assertion.text"]


def test_without_a_judge_the_run_records_unsupported(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(EVAL)]])
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
        result = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    (crun,) = result["checks"]
    assert crun["status"] == "ok" and crun["passed"] is False and crun["score"] == 0.0
    assert crun["details"].startswith("unsupported assertion: natural-language eval needs an LLM judge")
