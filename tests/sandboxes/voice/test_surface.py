"""The voice sandbox end to end (issue 10 §4): datasets and `add_voice_turns` seed the call,
`POST voice/turns` takes one turn or an array (201), `GET voice/turns` is the transcript, and
`voice-transcript` judges it through `complete`, `rescore` and the state tar.gz alike."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import httpx

from tests.service.builders import criterion, error, make_benchmark, make_dataset, ok
from tests.service.conftest import Server

Json = dict[str, Any]

GREETING = {
    "turns": [{"speaker": "ivr", "text": "Thank you for calling Acme Health.", "start_ms": 0, "end_ms": 1800}]
}
ASKED = {
    "assert": "voice-transcript",
    "speaker": "agent",
    "contains": ["member ID", "date of birth"],
    "not_contains": ["social security number"],
}


def start_voice(
    server: Server, api: httpx.Client, scenario: list[Json] | None = None
) -> tuple[str, str, Json]:
    dataset = make_dataset(api, "voice", GREETING)
    catalog = make_benchmark(api, [[criterion(ASKED)]])
    body: Json = {"dataset_ids": [dataset["id"]], "task_item": {"instructions": "verify the caller"}}
    if scenario:
        body["scenario"] = scenario
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json=body))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(task_run["start_url"]))
    return task_run["id"], run["bearer_token"], started


def test_a_right_agent_passes_a_wrong_one_gets_evidence(server: Server, api: httpx.Client) -> None:
    right_id, right_token, right = start_voice(server, api, [{"step": "add_voice_turns", "turns": [
        {"speaker": "caller", "text": "Hi, I have a question about my claim."}
    ]}])  # fmt: skip
    wrong_id, wrong_token, wrong = start_voice(server, api)
    with server.client(right_token) as agent:
        turns = right["endpoints"]["voice"] + "/turns"
        one = ok(agent.post(turns, json={"speaker": "agent", "text": "Can I have your member ID?"}), 201)
        assert one == {"seq": 3, "speaker": "agent", "text": "Can I have your member ID?"}
        many = ok(agent.post(turns, json=[
            {"speaker": "caller", "text": "It is A123."},
            {"speaker": "agent", "text": "And your date of birth, please?", "start_ms": 9000, "end_ms": 11000},
        ]), 201)["data"]  # fmt: skip
        assert [t["seq"] for t in many] == [4, 5]
        transcript = ok(agent.get(turns))["data"]
        assert [(t["speaker"], t["seeded"]) for t in transcript] == [
            ("ivr", True), ("caller", True), ("agent", False), ("caller", False), ("agent", False)
        ]  # fmt: skip
        passed = ok(agent.post(f"/v1/task-runs/{right_id}/complete"))
    with server.client(wrong_token) as agent:
        ok(agent.post(wrong["endpoints"]["voice"] + "/turns", json={
            "speaker": "agent", "text": "Please read me your social security number."
        }), 201)  # fmt: skip
        failed = ok(agent.post(f"/v1/task-runs/{wrong_id}/complete"))
    assert passed["verdict"] == "pass", passed
    assert failed["verdict"] == "fail" and failed["checks"][0]["score"] == 0
    phrases = {p["phrase"]: p for p in failed["checks"][0]["evidence"]["phraseResults"]}
    assert (
        phrases["social security number"]["passed"] is False
        and phrases["social security number"]["turn"] == 1
    )
    events = ok(api.get(f"/task-runs/{right_id}/events", params={"limit": 100}))["data"]
    assert [e["type"] for e in events] == ["voice_turn"] * 3
    rescored = ok(api.post(f"/task-runs/{right_id}/rescore"))
    assert [c["score"] for c in rescored["checks"]] == [c["score"] for c in passed["checks"]]
    state = api.get(f"/task-runs/{right_id}/state")
    with tarfile.open(fileobj=io.BytesIO(state.content)) as archive:
        member = archive.extractfile("snapshot/voice/turns.json")
        assert member is not None
        assert [t["speaker"] for t in json.loads(member.read())] == [
            "ivr",
            "caller",
            "agent",
            "caller",
            "agent",
        ]


def test_bad_turns_are_422_and_nothing_is_half_written(server: Server, api: httpx.Client) -> None:
    _, token, started = start_voice(server, api)
    turns = started["endpoints"]["voice"] + "/turns"
    with server.client(token) as agent:
        details = error(agent.post(turns, json={"speaker": "robot", "text": "beep"}), 422, "VALIDATION_ERROR")
        assert set(details) == {"speaker"}
        batch = [{"speaker": "agent", "text": "fine"}, {"speaker": "narrator", "text": "x", "end_ms": -1}]
        details = error(agent.post(turns, json=batch), 422, "VALIDATION_ERROR")
        assert set(details) == {"1.speaker", "1.end_ms"}
        error(
            agent.post(turns, content=b"{not json", headers={"Content-Type": "application/json"}),
            400,
            "BAD_REQUEST",
        )
        assert [t["speaker"] for t in ok(agent.get(turns))["data"]] == ["ivr"]


def test_a_voice_dataset_is_validated_at_create(api: httpx.Client) -> None:
    body = {
        "name": "bad",
        "type": "voice",
        "data": {"turns": [{"speaker": "ivr", "text": "hi"}, {"text": 3}]},
    }
    details = error(api.post("/datasets", json=body), 422, "VALIDATION_ERROR")
    assert set(details) == {"data.turns.1.speaker", "data.turns.1.text"}


def test_the_agent_reads_its_task_but_never_its_criteria(server: Server, api: httpx.Client) -> None:
    task_run_id, token, started = start_voice(server, api)
    assert started["task"]["task_item"] == {"instructions": "verify the caller"}
    assert set(started["task"]) == {"id", "name", "task_item"}
    with server.client(token) as agent:
        read = ok(agent.get(f"/v1/task-runs/{task_run_id}"))
    assert read["task"] == started["task"] and read["phase"] == "started"
    assert "criteria" not in json.dumps(read) and "member ID" not in json.dumps(read)
    assert "member ID" not in json.dumps(started)
