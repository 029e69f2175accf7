"""What a deployment adds to grading, end to end through the HTTP API (issue 13): the LLM judge
(`ASSAY_JUDGE_URL`, here a real local OpenAI-compatible stub server) scoring natural-language
evals with its answers recorded and replayed by `rescore`, and the semantic voice tier
(`ASSAY_VOICE_SEMANTIC=1`) deciding a voice criterion the default tiers fail."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.checks import semantic_unavailable
from assay.checks._semantic import THRESHOLD
from assay.judge import JudgeSettings
from assay.service.settings import Settings
from tests.judge.stub import StubJudge, stub_judge

from .builders import criterion, error, make_benchmark, ok, start_run
from .conftest import BOOTSTRAP_KEY, Server, _serve

EVAL = {"assert": "natural-language", "text": "The agent never read out a social security number."}


def _server(tmp_path: Path, **settings: Any) -> Iterator[Server]:
    config = Settings(
        data_dir=tmp_path,
        bootstrap_api_key=BOOTSTRAP_KEY,
        sweep_interval=0.2,
        **settings,
    ).with_free_ports()
    for url, app in _serve(config):
        yield Server(url, app.state.database, BOOTSTRAP_KEY, "sqlite")


@pytest.fixture
def judge_stub() -> Iterator[StubJudge]:
    with stub_judge(lambda body: '{"verdict": "pass", "reason": "No SSN appears in the state."}') as stub:
        yield stub


@pytest.fixture
def judged_server(tmp_path: Path, judge_stub: StubJudge) -> Iterator[Server]:
    yield from _server(tmp_path, judge=JudgeSettings(judge_stub.url, model="judge-m", timeout=5))


def _complete(server: Server, api: httpx.Client, benchmark_id: str) -> tuple[str, dict[str, Any]]:
    run = start_run(api, benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
        return task_run_id, ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))


def test_judge_scores_evals_and_rescore_replays_it(judged_server: Server, judge_stub: StubJudge) -> None:
    with judged_server.client() as api:
        catalog = make_benchmark(api, [[criterion(EVAL)]])
        task_run_id, result = _complete(judged_server, api, catalog.benchmark_id)
        (check,) = result["checks"]
        assert check["status"] == "ok" and check["passed"] is True
        assert check["details"] == "LLM judge (stub-judge-1) passed the eval: No SSN appears in the state."
        record = check["evidence"]["judge"]
        assert record["prompt_version"] == "natural-language/1" and record["model"] == "stub-judge-1"
        assert json.loads(record["raw"])["verdict"] == "pass" and record["prompt_tokens"] == 321
        assert len(judge_stub.requests) == 1 and judge_stub.requests[0]["model"] == "judge-m"

        replayed = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
        assert replayed["score"] == 1.0 and len(judge_stub.requests) == 1
        assert replayed["checks"][0]["evidence"]["judge"]["replayed"] is True

        asked = ok(api.post(f"/task-runs/{task_run_id}/rescore", params={"rejudge": "true"}))
        assert asked["score"] == 1.0 and len(judge_stub.requests) == 2
        assert asked["checks"][0]["evidence"]["judge"]["replayed"] is False


def test_rejudge_without_a_judge_is_409(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(EVAL)]])
    task_run_id, _ = _complete(server, api, catalog.benchmark_id)
    error(api.post(f"/task-runs/{task_run_id}/rescore", params={"rejudge": "true"}), 409, "CONFLICT")


def test_a_judge_that_answers_garbage_makes_the_criterion_error(tmp_path: Path) -> None:
    with stub_judge(lambda body: "I think so, yes.") as stub:
        for server in _server(tmp_path, judge=JudgeSettings(stub.url, timeout=5)):
            with server.client() as api:
                catalog = make_benchmark(api, [[criterion(EVAL)]])
                _, result = _complete(server, api, catalog.benchmark_id)
    (check,) = result["checks"]
    assert check["status"] == "error" and check["score"] == 0.0
    assert check["details"].startswith("LLM judge could not decide: the judge's answer is not a JSON object")


VOICE = {
    "assert": "voice-transcript",
    "speaker": "agent",
    "contains": ["physical therapy is covered"],
}
TURNS = [
    {"speaker": "caller", "text": "Does the plan cover PT for my knee?"},
    {"speaker": "agent", "text": "Yes. Physical therapy visits are a covered benefit."},
]


@pytest.mark.semantic
@pytest.mark.skipif(semantic_unavailable() is not None, reason=semantic_unavailable() or "")
@pytest.mark.parametrize("semantic", [False, True])
def test_voice_criterion_needs_the_semantic_tier(tmp_path: Path, semantic: bool) -> None:
    for server in _server(tmp_path, voice_semantic=semantic):
        with server.client() as api:
            catalog = make_benchmark(api, [[criterion(VOICE)]])
            run = start_run(api, catalog.benchmark_id)
            task_run_id = run.task_runs[0]["id"]
            with server.client(run.token) as agent:
                started = ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
                ok(agent.post(started["endpoints"]["voice"] + "/turns", json=TURNS), 201)
                result = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    (check,) = result["checks"]
    found = check["evidence"]["phraseResults"][0]
    if semantic:
        assert check["passed"] is True and found["method"] == "semantic" and found["similarity"] >= THRESHOLD
        assert check["evidence"]["tiers"] == ["exact", "fuzzy", "vocabulary", "semantic"]
    else:
        assert check["passed"] is False and found["found"] is False and found["method"] is None
        assert check["evidence"]["tiers"] == ["exact", "fuzzy", "vocabulary"]
