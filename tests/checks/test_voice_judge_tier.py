"""Tier 4 of `voice-transcript` and judged `natural-language` evals, through `verify_task` with
the real HTTP client against a local OpenAI-compatible stub (issue 13): what is asked, what is
recorded, guards on the judge's proposal, `error` on timeouts and garbage, and replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.judge.stub import HANG, stub_judge

from assay.core.judging import ReplayJudge, judge_records
from assay.core.state import VoiceTurn
from assay.judge import JudgeSettings, OpenAIJudge
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

TURNS = [
    VoiceTurn("caller", "Hi, I'm calling about my claim."),
    VoiceTurn("agent", "Sure. Could you read me the number printed on the front of your card?"),
    VoiceTurn("agent", "Thanks. No prior authorization is required for the MRI."),
]


@pytest.fixture
def state(tmp_path: Path) -> Any:
    return open_snapshot(write_snapshot(tmp_path / "snapshot", voice=TURNS))


@pytest.fixture
def judged() -> Iterator[Any]:
    """`judged(reply)` → (judge, stub): an OpenAIJudge talking to a stub that answers `reply`."""
    opened: list[Any] = []

    def make(reply: Any, timeout: float = 5) -> tuple[OpenAIJudge, Any]:
        context = stub_judge(reply)
        stub = context.__enter__()
        judge = OpenAIJudge(JudgeSettings(stub.url, model="judge-m", timeout=timeout))
        opened.append((context, judge))
        return judge, stub

    yield make
    for context, judge in opened:
        judge.close()
        context.__exit__(None, None, None)


def voice(*contains: str, **extra: Any) -> CriterionSpec:
    return CriterionSpec({"assert": "voice-transcript", "contains": list(contains), **extra})


def run_of(specs: list[CriterionSpec], state: Any, **kwargs: Any) -> dict[str, Any]:
    runs: list[dict[str, Any]] = verify_task(specs, state, **kwargs).as_json()["criterion_runs"]
    return runs[0]


def test_the_judge_is_asked_only_what_tiers_1_2_did_not_find(state: Any, judged: Any) -> None:
    quote = "Could you read me the number printed on the front of your card?"
    judge, stub = judged(lambda body: json.dumps({"found": True, "turn": 1, "quote": quote}))
    run = run_of([voice("calling about my claim", "member ID")], state, judge=judge)
    assert run["status"] == "ok" and run["passed"] is True
    exact, judged_phrase = run["evidence"]["phraseResults"]
    assert exact["method"] == "exact" and "judge" not in exact
    assert len(stub.requests) == 1
    user = stub.requests[0]["messages"][1]["content"]
    assert "REQUIRED STATEMENT: member ID" in user and "[1] agent: Sure. Could you read me" in user
    assert judged_phrase["method"] == "judge" and judged_phrase["turn"] == 1
    assert judged_phrase["text"] == quote.rstrip("?") and judged_phrase["similarity"] is None
    record = judged_phrase["judge"]
    assert record["model"] == "stub-judge-1" and record["prompt_version"] == "voice-phrase/1"
    assert json.loads(record["raw"]) == {"found": True, "turn": 1, "quote": quote}
    assert record["latency_ms"] > 0 and (record["prompt_tokens"], record["completion_tokens"]) == (321, 17)
    assert record["replayed"] is False and run["evidence"]["tiers"] == [
        "exact",
        "fuzzy",
        "vocabulary",
        "judge",
    ]


def test_guards_reject_what_the_judge_proposes(state: Any, judged: Any) -> None:
    quote = "No prior authorization is required for the MRI."
    judge, _ = judged(lambda body: json.dumps({"found": True, "turn": 2, "quote": quote}))
    run = run_of([voice("the MRI needs a prior authorization")], state, judge=judge)
    result = run["evidence"]["phraseResults"][0]
    assert run["passed"] is False and result["found"] is False and result["method"] is None
    assert result["judge"]["rejected_by"] == "number or negation guard"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (lambda body: "Yes, the agent asked for it.", "is not a JSON object"),
        (lambda body: '{"found": "yes"}', "expected"),
        (lambda body: '{"found": true, "turn": 9, "quote": "x"}', "turn 9, which is not one"),
        (lambda body: (503, "busy"), "answered HTTP 503"),
        (lambda body: HANG, "did not answer within"),
    ],
)
def test_a_judge_that_cannot_decide_makes_the_criterion_error(
    state: Any, judged: Any, reply: Any, reason: str
) -> None:
    judge, _ = judged(reply, timeout=0.3)
    run = run_of([voice("member ID")], state, judge=judge)
    assert run["status"] == "error" and run["score"] == 0.0
    assert run["details"].startswith("LLM judge could not decide 'member ID': ") and reason in run["details"]


def test_natural_language_eval_is_judged_and_recorded(state: Any, judged: Any) -> None:
    judge, stub = judged(lambda body: '{"verdict": "pass", "reason": "Turn 2 says no auth is needed."}')
    text = "The agent told the caller that the MRI needs no prior authorization."
    run = run_of([CriterionSpec({"assert": "natural-language", "text": text})], state, judge=judge)
    assert run["status"] == "ok" and run["passed"] is True and run["score"] == 1.0
    assert run["details"] == "LLM judge (stub-judge-1) passed the eval: Turn 2 says no auth is needed."
    assert run["evidence"]["judge"]["prompt_version"] == "natural-language/1"
    user = stub.requests[0]["messages"][1]["content"]
    assert f"EVAL: {text}" in user and "[2] agent: Thanks. No prior authorization" in user


def test_explicit_judge_tier_without_a_judge_is_an_error(state: Any) -> None:
    run = run_of([voice("member ID", tiers=["exact", "judge"])], state)
    assert run["status"] == "error" and "no LLM judge is configured" in run["details"]


def test_replay_reproduces_without_asking(state: Any, judged: Any) -> None:
    quote = "Could you read me the number printed on the front of your card?"
    judge, stub = judged(lambda body: json.dumps({"found": True, "turn": 1, "quote": quote}))
    specs = [voice("member ID"), CriterionSpec({"assert": "natural-language", "text": "Polite agent."})]
    judge_nl, _ = judged(lambda body: '{"verdict": "fail", "reason": "No greeting."}')
    first = verify_task(specs[:1], state, judge=judge).as_json()["criterion_runs"]
    first += verify_task(specs[1:], state, judge=judge_nl).as_json()["criterion_runs"]
    records: dict[str, Any] = {}
    for run in first:
        records.update(judge_records(run["evidence"]))
    assert len(records) == 2
    again = verify_task(specs, state, judge=ReplayJudge(records)).as_json()["criterion_runs"]
    assert [r["score"] for r in again] == [r["score"] for r in first] == [1.0, 0.0]
    assert again[0]["evidence"]["phraseResults"][0]["judge"]["replayed"] is True
    assert again[1]["details"] == first[1]["details"] and len(stub.requests) == 1
    unknown = verify_task([voice("date of birth")], state, judge=ReplayJudge(records)).as_json()
    assert unknown["criterion_runs"][0]["status"] == "error"
    assert "no recorded voice-phrase/1 verdict" in unknown["criterion_runs"][0]["details"]
