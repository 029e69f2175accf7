"""`assay.judge.OpenAIJudge` against a real local HTTP server (tests/judge/stub.py) and against
the recorded shape of a real OpenAI chat completion (tests/fixtures/judge/chat_completion.json)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.conftest import FIXTURES
from tests.judge.stub import HANG, stub_judge

from assay.core.judging import JudgeQuestion, JudgeUnavailable
from assay.judge import JudgeSettings, OpenAIJudge, judge_from_env, voice_semantic_from_env

QUESTION = JudgeQuestion("voice-phrase/1", "You check transcripts.", "REQUIRED STATEMENT: member ID")


def test_request_shape_and_answer() -> None:
    with stub_judge(lambda body: '{"found": false, "turn": null, "quote": null}') as stub:
        judge = OpenAIJudge(JudgeSettings(stub.url, model="m-1", api_key="sk-test", timeout=5))
        try:
            answer = judge.ask(QUESTION)
        finally:
            judge.close()
    (body,) = stub.requests
    assert body == {
        "model": "m-1",
        "messages": [
            {"role": "system", "content": QUESTION.system},
            {"role": "user", "content": QUESTION.user},
        ],
        "temperature": 0,
        "max_tokens": 300,
    }
    assert stub.headers[0]["Authorization"] == "Bearer sk-test"
    assert answer.raw == '{"found": false, "turn": null, "quote": null}'
    assert answer.model == "stub-judge-1" and answer.latency_ms > 0
    assert (answer.prompt_tokens, answer.completion_tokens) == (321, 17)
    assert answer.replayed is False


def test_recorded_real_response_shape() -> None:
    recorded = json.loads((FIXTURES / "judge/chat_completion.json").read_text(encoding="utf-8"))
    with stub_judge(lambda body: (200, recorded)) as stub:
        judge = OpenAIJudge(JudgeSettings(stub.url + "/chat/completions", timeout=5))
        try:
            answer = judge.ask(QUESTION)
        finally:
            judge.close()
    assert answer.model == "gpt-4.1-2025-04-14"
    assert json.loads(answer.raw)["turn"] == 1
    assert (answer.prompt_tokens, answer.completion_tokens) == (19, 10)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (lambda body: (500, {"error": {"message": "overloaded"}}), "answered HTTP 500"),
        (lambda body: (200, "<html>gateway</html>"), "is not an OpenAI chat completion"),
        (lambda body: (200, {"choices": []}), "is not an OpenAI chat completion"),
        (lambda body: (200, {"choices": [{"message": {"content": None}}]}), "is not text"),
        (lambda body: HANG, "did not answer within 0.3 s"),
    ],
)
def test_failures_are_judge_unavailable(reply: Any, message: str) -> None:
    with stub_judge(reply) as stub:
        judge = OpenAIJudge(JudgeSettings(stub.url, timeout=0.3))
        try:
            with pytest.raises(JudgeUnavailable, match=message):
                judge.ask(QUESTION)
        finally:
            judge.close()


def test_refused_connection_is_judge_unavailable() -> None:
    with stub_judge(lambda body: "x") as stub:
        url = stub.url
    judge = OpenAIJudge(JudgeSettings(url, timeout=2))
    with pytest.raises(JudgeUnavailable, match="cannot be reached"):
        judge.ask(QUESTION)


def test_settings_from_env() -> None:
    assert judge_from_env({}) is None
    settings = JudgeSettings.from_env(
        {
            "ASSAY_JUDGE_URL": "http://127.0.0.1:9/v1",
            "ASSAY_JUDGE_MODEL": "llama-3.1-8b",
            "ASSAY_JUDGE_API_KEY": "k",
            "ASSAY_JUDGE_TIMEOUT": "7.5",
        }
    )
    assert settings == JudgeSettings("http://127.0.0.1:9/v1", "llama-3.1-8b", "k", 7.5)
    with pytest.raises(ValueError, match="ASSAY_JUDGE_TIMEOUT must be a number"):
        JudgeSettings.from_env({"ASSAY_JUDGE_URL": "http://x", "ASSAY_JUDGE_TIMEOUT": "soon"})
    with pytest.raises(ValueError, match="ASSAY_JUDGE_URL must be an http"):
        JudgeSettings.from_env({"ASSAY_JUDGE_URL": "ftp://x"})
    assert voice_semantic_from_env({}) is False
    assert voice_semantic_from_env({"ASSAY_VOICE_SEMANTIC": "0"}) is False
    with pytest.raises(ValueError, match="ASSAY_VOICE_SEMANTIC must be 1 or 0"):
        voice_semantic_from_env({"ASSAY_VOICE_SEMANTIC": "maybe"})
