"""The payer phone line end to end over HTTP: the agent dials the task run's number, walks the IVR
by keys or by speech, is verified by the representative and asks what the X12 271 and the portal
also answer; the sandbox writes both sides of the call to the transcript (`source: line`), the
agent cannot forge the line's turns, and a call open at the end of the run is hung up."""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select

from assay.sandboxes.voice.tables import VoiceCallRow, VoiceTurnRow
from assay.store import utcnow
from assay.store.models import TaskRun
from tests.sandboxes.portal.world import PAYER, PORTAL, SUBMISSION, dataset
from tests.sandboxes.x12.reading import every, read, transactions
from tests.sandboxes.x12.requests import eligibility_270, interchange, subscriber_270
from tests.service.builders import error, make_benchmark, ok, unique
from tests.service.conftest import Server

Json = dict[str, Any]
OPEN_MONDAY = "2026-05-04T15:00:00+00:00"
"""A weekday afternoon inside the default business hours and the member's 2026 coverage."""
ASKED_ON_THE_LINE = {
    "assert": "voice-transcript", "speaker": "agent", "source": "line", "contains": ["what is the copay"],
}  # fmt: skip


def start_call_task(
    server: Server, api: httpx.Client, line: Json | None = None, criteria: list[Json] | None = None
) -> tuple[str, str, Json]:
    voice: Json = {"line": {"clock_start": OPEN_MONDAY, **(line or {})}}
    ids = [dataset(api, "x12", PAYER), dataset(api, "portal", PORTAL), dataset(api, "voice", voice)]
    environment = ok(api.post("/environments", json={"name": unique("env"), "dataset_ids": ids}), 201)
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("call"), "environment_id": environment["id"]}), 201
    )
    task_id = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "call the payer"}), 201)[
        "id"
    ]
    for i, assertion in enumerate(criteria or []):
        ok(api.post("/criteria", json={"task_id": task_id, "label": f"c{i}", "assertion": assertion}), 201)
    created = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    token, task_run_id = created["bearer_token"], created["task_runs"][0]["id"]
    with server.client(token) as agent:
        started = ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
    return task_run_id, token, started


def words(answer: Json) -> str:
    return " ".join(t["text"] for t in answer["said"] if t["kind"] == "speech")


def dial(agent: httpx.Client, started: Json) -> tuple[str, Json]:
    base = started["endpoints"]["voice"]
    answer = ok(
        agent.post(f"{base}/calls", json={"to": started["credentials"]["voice"]["phone_number"]}), 201
    )
    return f"{base}/calls/{answer['call_id']}", answer


def through_the_ivr_by_keys(agent: httpx.Client, call: str) -> Json:
    assert "10-digit National Provider Identifier" in words(
        ok(agent.post(f"{call}/dtmf", json={"digits": "1"}))
    )
    assert "You entered 1 2 3 4 5 6 7 8 9 3" in words(
        ok(agent.post(f"{call}/dtmf", json={"digits": "1234567893"}))
    )
    assert "member ID" in words(ok(agent.post(f"{call}/dtmf", json={"digits": "1"})))
    ok(agent.post(f"{call}/say", json={"text": "M 1 0 0 1"}))
    assert "date of birth" in words(ok(agent.post(f"{call}/dtmf", json={"digits": "1"})))
    assert "1980-04-02" in words(ok(agent.post(f"{call}/dtmf", json={"digits": "04021980"})))
    return ok(agent.post(f"{call}/dtmf", json={"digits": "1"}))


def portal_eligibility(server: Server, started: Json, member_id: str, birth_date: str) -> str:
    """The web portal's eligibility page for a member, as a signed-in browser sees it."""
    portal = started["credentials"]["portal"]
    with httpx.Client(base_url=server.url + portal["portal_url"], timeout=30) as browser:

        def csrf(path: str) -> str:
            found = re.search(r'name="csrf_token" value="([^"]+)"', browser.get(path).text)
            assert found is not None
            return found.group(1)

        fields = {
            "username": portal["username"],
            "password": portal["password"],
            "csrf_token": csrf("/login"),
        }
        assert browser.post("/login", data=fields).status_code == 303
        looked_up = {"member_id": member_id, "birth_date": birth_date, "csrf_token": csrf("/members")}
        page = browser.post("/members", data=looked_up)
        assert page.status_code == 200, page.text
        return page.text


def test_a_call_by_keys_is_verified_and_answered_as_the_271_and_the_portal_answer(
    server: Server, api: httpx.Client
) -> None:
    task_run_id, token, started = start_call_task(server, api, criteria=[ASKED_ON_THE_LINE])
    with server.client(token) as agent:
        pa = ok(agent.post(f"/v1/task-runs/{task_run_id}/portal/prior_auth_requests", json=SUBMISSION), 201)
        x12 = interchange("270", eligibility_270(subscriber_270("M1001", trace="T1", birth="19800402")))
        reply = agent.post(
            f"{started['endpoints']['x12']}/270", content=x12, headers={"Content-Type": "application/edi-x12"}
        )
        [eligibility] = transactions(reply.text)
        call, first = dial(agent, started)
        assert first["status"] == "active" and "press 1" in words(first)
        picked_up = through_the_ivr_by_keys(agent, call)
        kinds = [t["kind"] for t in picked_up["said"]]
        assert "transfer" in kinds and "hold" in kinds
        hold = next(t for t in picked_up["said"] if t["kind"] == "hold")
        rep_hello = next(t for t in picked_up["said"] if t["speaker"] == "rep")
        assert rep_hello["start_ms"] - hold["start_ms"] >= 45_000  # the hold is on the virtual clock
        assert "may I have your name" in rep_hello["text"]
        refused = ok(agent.post(f"{call}/say", json={"text": "What is the copay?"}))
        assert [t["kind"] for t in refused["said"]] == ["refused", "speech"]
        assert "$" not in words(refused)
        verified = ok(agent.post(f"{call}/say", json={"text": "My name is Dr. Rivera."}))
        assert "verified" in [t["kind"] for t in verified["said"]]
        copay = words(ok(agent.post(f"{call}/say", json={"text": "Thanks. What is the copay?"})))
        deductible = words(ok(agent.post(f"{call}/say", json={"text": "And the deductible?"})))
        auth = words(
            ok(
                agent.post(
                    f"{call}/say",
                    json={"text": "What is the status of the prior authorization for procedure 70551?"},
                )
            )
        )
        coverage = words(ok(agent.post(f"{call}/say", json={"text": "Is the member's coverage active?"})))
        goodbye = ok(
            agent.post(f"{call}/say", json={"text": "Can I have a reference number? That's all, goodbye."})
        )
        assert goodbye["status"] == "ended"
        reference = next(t["text"] for t in goodbye["said"] if t["kind"] == "reference")
        assert reference in words(goodbye)
        error(agent.post(f"{call}/say", json={"text": "hello?"}), 409, "CONFLICT")
        eligibility_page = portal_eligibility(server, started, "M1001", "1980-04-02")
        transcript = ok(agent.get(f"{started['endpoints']['voice']}/turns"))["data"]
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    # one payer, three channels: the line says what the 271 and the portal say
    assert read(eligibility, "EB[B]07") == "25" and "$25.00" in copay
    assert every(eligibility, "2110C/EB[C]07") == ["1500", "600"]
    assert (
        "$1,500.00" in deductible and "$900.00 has been met" in deductible and "$600.00 remains" in deductible
    )
    assert pa["status"] == "approved" and f"is approved, authorization number {pa['auth_number']}" in auth
    assert all(
        shown in eligibility_page for shown in ("Acme Gold PPO", "2026-01-01", "2026-12-31", "25.00", "600")
    )
    assert "coverage is active under plan Acme Gold PPO, effective 2026-01-01 through 2026-12-31" in coverage
    assert {t["source"] for t in transcript} == {"line"} and {t["speaker"] for t in transcript} == {
        "agent",
        "ivr",
        "rep",
    }
    assert all(t["call_id"] == call.rsplit("/", 1)[1] for t in transcript)
    assert [t["text"] for t in transcript if t["kind"] == "dtmf"] == [
        "1",
        "1234567893",
        "1",
        "1",
        "04021980",
        "1",
    ]
    assert completed["verdict"] == "pass", completed
    [phrase] = completed["checks"][0]["evidence"]["phraseResults"]
    assert phrase["call_id"] == call.rsplit("/", 1)[1] and transcript[phrase["turn"]]["speaker"] == "agent"
    events = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 100}))["data"]
    assert (
        sum(e["type"] == "voice_call" for e in events) == 1 + 7 + 7
    )  # the refused say after the hang-up is no event


def test_the_menu_by_speech_fuzzy_retries_and_a_bad_npi(server: Server, api: httpx.Client) -> None:
    _, token, started = start_call_task(server, api)
    with server.client(token) as agent:
        call, _ = dial(agent, started)
        assert "didn't get that" in words(ok(agent.post(f"{call}/say", json={"text": "pizza please"})))
        assert "Provider Identifier" in words(
            ok(agent.post(f"{call}/say", json={"text": "I'd like eligibilty"}))
        )
        bad = words(
            ok(agent.post(f"{call}/say", json={"text": "one two three four five six seven eight nine zero"}))
        )
        assert "didn't get that" in bad  # 1234567890 fails the NPI check digit
        good = words(
            ok(agent.post(f"{call}/say", json={"text": "one two three four five six seven eight nine three"}))
        )
        assert "You entered 1 2 3 4 5 6 7 8 9 3" in good
        assert "member ID" in words(ok(agent.post(f"{call}/say", json={"text": "yes"})))
        error(agent.post(f"{call}/dtmf", json={"digits": "12a"}), 422, "VALIDATION_ERROR")
        second, _ = dial(agent, started)  # many calls per run, each its own dialogue
        assert "press 1" in words(ok(agent.post(f"{second}/say", json={"text": "pizza"})))
        assert [c["status"] for c in ok(agent.get(f"{started['endpoints']['voice']}/calls"))["data"]] == [
            "active",
            "active",
        ]
        error(
            agent.post(f"{started['endpoints']['voice']}/calls", json={"to": "+15550000000"}),
            422,
            "VALIDATION_ERROR",
        )
        error(
            agent.post(f"{started['endpoints']['voice']}/calls/call_nope/say", json={"text": "hi"}),
            404,
            "NOT_FOUND",
        )


def test_the_representative_refuses_a_wrong_birth_date_and_menu_zero_goes_straight_to_it(
    server: Server, api: httpx.Client
) -> None:
    _, token, started = start_call_task(server, api, {"rep": {"name": "Sam"}})
    with server.client(token) as agent:
        call, _ = dial(agent, started)
        rep = words(ok(agent.post(f"{call}/dtmf", json={"digits": "0"})))
        assert "this is Sam" in rep and "your NPI" in rep and "the member ID" in rep
        wrong = ok(agent.post(f"{call}/say", json={
            "text": "This is Dr. Rivera, NPI 1234567893, member M1001, date of birth 1980-04-03. Is the member eligible?"
        }))  # fmt: skip
        assert "don't match our records" in words(wrong) and "verified" not in [
            t["kind"] for t in wrong["said"]
        ]
        right = words(
            ok(
                agent.post(
                    f"{call}/say",
                    json={"text": "Sorry, member M1001 born April 2, 1980. Is coverage active?"},
                )
            )
        )
        assert "coverage is active under plan Acme Gold PPO, effective 2026-01-01 through 2026-12-31" in right


def test_the_agent_cannot_post_the_lines_turns_and_line_criteria_ignore_reported_ones(
    server: Server, api: httpx.Client
) -> None:
    task_run_id, token, started = start_call_task(server, api, criteria=[ASKED_ON_THE_LINE])
    turns = f"{started['endpoints']['voice']}/turns"
    with server.client(token) as agent:
        for speaker in ("ivr", "rep"):
            details = error(
                agent.post(turns, json={"speaker": speaker, "text": "You are verified."}),
                422,
                "VALIDATION_ERROR",
            )
            assert "phone line" in details["speaker"][0]
        posted = ok(agent.post(turns, json={"speaker": "agent", "text": "What is the copay?"}), 201)
        assert posted["seq"] == 1
        assert ok(agent.get(turns))["data"][0]["source"] == "reported"
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert completed["verdict"] == "fail" and completed["checks"][0]["score"] == 0


def test_behaviours_mishear_and_hold_and_concurrent_runs_are_isolated(
    server: Server, api: httpx.Client
) -> None:
    line = {"rep": {"behaviours": ["mishear_digit", "hold"], "hold_ms": 120000}}
    _, token, started = start_call_task(server, api, line)
    _, other_token, other = start_call_task(server, api)
    with server.client(token) as agent, server.client(other_token) as stranger:
        call, _ = dial(agent, started)
        error(
            stranger.post(
                f"{other['endpoints']['voice']}/calls/{call.rsplit('/', 1)[1]}/say", json={"text": "hi"}
            ),
            404,
            "NOT_FOUND",
        )
        ok(agent.post(f"{call}/dtmf", json={"digits": "0"}))
        misheard = words(ok(agent.post(f"{call}/say", json={
            "text": "This is Dr. Rivera, NPI 1234567893, member M1001, date of birth 04/02/1980."
        })))  # fmt: skip
        assert "member ID M 1 0 0 2. Is that right?" in misheard
        corrected = ok(agent.post(f"{call}/say", json={"text": "No, it is M1001."}))
        assert "verified" in [t["kind"] for t in corrected["said"]]
        held = ok(agent.post(f"{call}/say", json={"text": "What is the copay?"}))
        hold = next(t for t in held["said"] if t["kind"] == "hold")
        answer = next(t for t in held["said"] if "$25.00" in t["text"])
        assert answer["start_ms"] - hold["start_ms"] >= 120_000


def test_a_call_open_at_the_deadline_is_hung_up(server: Server, api: httpx.Client) -> None:
    task_run_id, token, started = start_call_task(server, api)
    with server.client(token) as agent:
        call, _ = dial(agent, started)
        with server.database.transaction() as session:
            session.get(TaskRun, task_run_id).deadline_at = utcnow() - timedelta(seconds=1)  # type: ignore[union-attr]
        error(agent.post(f"{call}/say", json={"text": "hello"}), 409, "CONFLICT")
        assert ok(api.get(f"/task-runs/{task_run_id}"))["status"] == "timed_out"
    with server.database.transaction() as session:
        row = session.execute(select(VoiceCallRow.status, VoiceCallRow.end_reason)).all()
        mine = session.execute(
            select(VoiceCallRow.status, VoiceCallRow.end_reason).where(
                VoiceCallRow.id == call.rsplit("/", 1)[1]
            )
        ).one()
    assert row and tuple(mine) == ("ended", "the task deadline passed")
    with server.database.transaction() as session:
        turns = session.execute(
            select(VoiceTurnRow.speaker, VoiceTurnRow.text, VoiceTurnRow.kind, VoiceTurnRow.source)
            .where(VoiceTurnRow.call_id == call.rsplit("/", 1)[1])
            .order_by(VoiceTurnRow.seq)
        ).all()
    # the line's hang-up is written although the agent's `say` was refused: a system write
    assert tuple(turns[-1]) == ("ivr", "the task deadline passed", "hangup", "line")
    assert "hello" not in [turn.text for turn in turns]


def test_an_idle_agent_earns_nothing_and_a_hung_up_call_ends_at_complete(
    server: Server, api: httpx.Client
) -> None:
    idle_id, idle_token, _ = start_call_task(server, api, criteria=[ASKED_ON_THE_LINE])
    with server.client(idle_token) as agent:
        assert ok(agent.post(f"/v1/task-runs/{idle_id}/complete"))["verdict"] == "fail"
    task_run_id, token, started = start_call_task(server, api, criteria=[ASKED_ON_THE_LINE])
    with server.client(token) as agent:
        call, _ = dial(agent, started)
        ok(agent.post(f"{call}/dtmf", json={"digits": "0"}))
        ok(agent.post(f"{call}/say", json={"text": "Hi, what is the copay?"}))
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert completed["verdict"] == "pass"
    state = api.get(f"/task-runs/{task_run_id}/state")
    assert state.status_code == 200
    assert re.search(rb'"kind": ?"hangup"', _turns_json(state.content))


def _turns_json(archive: bytes) -> bytes:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.extractfile("snapshot/voice/turns.json")
        assert member is not None
        return member.read()


CALL_WENT_WELL = {
    "assert": "voice-call",
    "reached": "rep",
    "verified_before_asking": True,
    "dtmf_path": ["0"],
    "reference_captured_in": [{"surface": "portal", "resource": "referrals"}],
    "max_duration_ms": 600_000,
    "max_first_word_ms": 60_000,
    "max_latency_p50_ms": 60_000,
    "max_talk_over": 0,
}


def test_voice_call_grades_verification_the_key_path_the_reference_number_and_talk_over(
    server: Server, api: httpx.Client
) -> None:
    good_id, good_token, good = start_call_task(server, api, criteria=[CALL_WENT_WELL])
    with server.client(good_token) as agent:
        call, _ = dial(agent, good)
        ok(agent.post(f"{call}/dtmf", json={"digits": "0"}))
        ok(agent.post(f"{call}/say", json={
            "text": "This is Dr. Rivera, NPI 1234567893, member M1001, date of birth 1980-04-02."
        }))  # fmt: skip
        ok(agent.post(f"{call}/say", json={"text": "Is the member's coverage active?"}))
        ended = ok(
            agent.post(f"{call}/say", json={"text": "What is the reference number? That's all, goodbye."})
        )
        number = next(t["text"] for t in ended["said"] if t["kind"] == "reference")
        row = {"referral_id": "R9", "member_id": "M1001", "note": f"payer call ref {number}"}
        ok(agent.post(f"/v1/task-runs/{good_id}/portal/referrals", json=row), 201)
        passed = ok(agent.post(f"/v1/task-runs/{good_id}/complete"))
    assert passed["verdict"] == "pass", passed["checks"][0]
    evidence = passed["checks"][0]["evidence"]
    assert evidence["call_id"] == call.rsplit("/", 1)[1]
    [judged] = evidence["calls"]
    assert judged["fields"]["reference_captured_in"]["actual"]["found_in"]["resource"] == "referrals"
    assert judged["figures"]["reference_number"] == number and judged["figures"]["talk_over"] == 0

    bad_id, bad_token, bad = start_call_task(server, api, criteria=[CALL_WENT_WELL])
    with server.client(bad_token) as agent:
        call, _ = dial(agent, bad)
        ok(agent.post(f"{call}/dtmf", json={"digits": "1"}))
        ok(agent.post(f"{call}/say", json={"text": "representative please"}))
        ok(agent.post(f"{call}/say", json={"text": "operator", "barge_in": True}))
        failed = ok(agent.post(f"/v1/task-runs/{bad_id}/complete"))
    fields = failed["checks"][0]["evidence"]["calls"][0]["fields"]
    assert failed["verdict"] != "pass" and failed["checks"][0]["score"] < 1
    assert not fields["dtmf_path"]["passed"] and not fields["reference_captured_in"]["passed"]
    assert not fields["max_talk_over"]["passed"] and fields["max_talk_over"]["actual"] == 1


def test_voice_call_without_a_call_fails_and_a_criterion_must_ask_something(
    server: Server, api: httpx.Client
) -> None:
    task_id = make_benchmark(api, [[]]).task_ids[0]
    details = error(
        api.post("/criteria", json={"task_id": task_id, "label": "c", "assertion": {"assert": "voice-call"}}),
        422,
        "VALIDATION_ERROR",
    )
    assert "at least one of" in json.dumps(details)
    task_run_id, token, _ = start_call_task(
        server, api, criteria=[{"assert": "voice-call", "reached": "ivr"}]
    )
    with server.client(token) as agent:
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert (
        completed["verdict"] == "fail"
        and completed["checks"][0]["details"] == "No call was placed on the phone line"
    )


def _frames(ws: Any, until: str = "line-done") -> list[Json]:
    """Frames up to the line's `mark` named `until`, or its `stop`."""
    frames: list[Json] = []
    while True:
        frame = json.loads(ws.recv(timeout=30))
        frames.append(frame)
        if frame["event"] == "stop" or (frame["event"] == "mark" and frame["mark"]["name"] == until):
            return frames
        if frame["event"] == "error" and until == "error":
            return frames


def _spoken(frames: list[Json]) -> str:
    return " ".join(f["media"]["text"] for f in frames if f["event"] == "media")


def test_the_stream_speaks_twilio_events_with_keys_in_band(server: Server, api: httpx.Client) -> None:
    from websockets.sync.client import connect

    task_run_id, token, started = start_call_task(server, api, criteria=[ASKED_ON_THE_LINE])
    number = started["credentials"]["voice"]["phone_number"]
    url = (
        server.url.replace("http://", "ws://") + started["endpoints"]["voice"] + "/calls/stream?to=" + number
    )
    with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        assert json.loads(ws.recv(timeout=30))["event"] == "connected"
        start = json.loads(ws.recv(timeout=30))
        assert start["event"] == "start" and start["start"]["callSid"].startswith("call_")
        greeting = _frames(ws)
        assert "press 1" in _spoken(greeting) and greeting[0]["media"]["track"] == "outbound"
        ws.send(json.dumps({"event": "dtmf", "dtmf": {"digit": "0"}}))
        picked_up = _frames(ws)
        assert [f["mark"]["name"] for f in picked_up if f["event"] == "mark"] == [
            "transfer",
            "hold",
            "line-done",
        ]
        assert "Thank you for calling Acme Health" in _spoken(picked_up)
        ws.send("not json")
        assert _frames(ws, "error")[-1]["error"]["code"] == "BAD_FRAME"
        ws.send(json.dumps({"event": "media", "media": {"text": "What is the copay?"}}))
        assert "refused" in [f["mark"]["name"] for f in _frames(ws) if f["event"] == "mark"]
        ws.send(json.dumps({"event": "stop"}))
        stop = _frames(ws)[-1]
        assert stop["event"] == "stop" and stop["stop"]["reason"] == "agent hung up"
    with server.client(token) as agent:
        turns = ok(agent.get(f"{started['endpoints']['voice']}/turns"))["data"]
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert [t["text"] for t in turns if t["kind"] == "dtmf"] == ["0"] and {t["source"] for t in turns} == {
        "line"
    }
    assert completed["verdict"] == "pass"


def test_the_stream_refuses_a_wrong_token_and_a_wrong_number(server: Server, api: httpx.Client) -> None:
    from websockets.sync.client import connect

    _, token, started = start_call_task(server, api)
    base = (
        server.url.replace("http://", "ws://")
        + started["endpoints"]["voice"]
        + "/calls/stream?to=+15550000000"
    )
    with connect(base, additional_headers={"Authorization": "Bearer nope"}) as ws:
        assert json.loads(ws.recv(timeout=30))["event"] == "error"
    with connect(base, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        assert json.loads(ws.recv(timeout=30))["event"] == "connected"
        refused = json.loads(ws.recv(timeout=30))
        assert refused["event"] == "error" and "no line answers" in refused["error"]["message"]


def test_self_test_an_idle_agent_earns_nothing_and_a_scripted_call_passes(api: httpx.Client) -> None:
    ids = [dataset(api, "x12", PAYER), dataset(api, "voice", {"line": {"clock_start": OPEN_MONDAY}})]
    say = "voice/calls/current/say"
    actions = [
        {"method": "POST", "path": "voice/calls", "json": {"to": "+1 (800) 555-0100"}},
        {"method": "POST", "path": "voice/calls/current/dtmf", "json": {"digits": "0"}},
        {"method": "POST", "path": say, "json": {"text": "This is Dr. Rivera, NPI 1234567893."}},
        {
            "method": "POST",
            "path": say,
            "json": {"text": "Member M1001, born April 2, 1980. What is the copay?"},
        },
        {"method": "POST", "path": say, "json": {"text": "Thanks, that's all. Goodbye."}},
    ]
    benchmark = ok(api.post("/benchmarks", json={"name": unique("call self-test")}), 201)
    task = ok(api.post("/tasks", json={
        "benchmark_id": benchmark["id"], "name": "ask the copay", "dataset_ids": ids,
        "reference": {"actions": actions},
    }), 201)  # fmt: skip
    for label, assertion in {
        "asked the copay on the line": ASKED_ON_THE_LINE,
        "verified and reached the rep": {
            "assert": "voice-call",
            "reached": "rep",
            "verified_before_asking": True,
        },
    }.items():
        ok(api.post("/criteria", json={"task_id": task["id"], "label": label, "assertion": assertion}), 201)
    report = ok(api.post(f"/tasks/{task['id']}/self-test"))
    assert report["ok"] is True and report["problems"] == [], report["problems"]
    assert report["idle"]["score"] == 0 and report["reference"]["score"] == 1
    assert all(action["status"] < 400 for action in report["reference"]["actions"])


REFILL = {
    "name": "Pat Kim",
    "reason": "I need a refill authorization for my lisinopril.",
    "known": {"member_id": "M1001", "birth_date": "April 2, 1980", "medication": "lisinopril 10 mg"},
    "unknown": ["pharmacy fax"],
}
CONFIRMED = {"assert": "voice-call", "caller_outcome": "stop"}


def _ringing(agent: httpx.Client, started: Json) -> str:
    [call] = ok(agent.get(f"{started['endpoints']['voice']}/calls"))["data"]
    assert (call["direction"], call["status"], call["number"]) == ("inbound", "ringing", "+15555550123")
    return f"{started['endpoints']['voice']}/calls/{call['call_id']}"


def test_an_inbound_caller_speaks_first_answers_what_it_knows_and_waits_for_the_confirmation(
    server: Server, api: httpx.Client
) -> None:
    task_run_id, token, started = start_call_task(server, api, {"incoming": [REFILL]}, criteria=[CONFIRMED])
    with server.client(token) as agent:
        call = _ringing(agent, started)
        error(agent.post(f"{call}/say", json={"text": "Hello?"}), 409, "CONFLICT")
        first = ok(agent.post(f"{call}/answer"))
        assert words(first) == "Hi, this is Pat Kim. I need a refill authorization for my lisinopril."
        error(agent.post(f"{call}/answer"), 409, "CONFLICT")
        known = words(
            ok(agent.post(f"{call}/say", json={"text": "Sure. What is your member ID and date of birth?"}))
        )
        assert known == "My member id is M1001. My birth date is April 2, 1980."
        unknown = words(ok(agent.post(f"{call}/say", json={"text": "Do you have the pharmacy fax?"})))
        assert unknown == "I'm sorry, I don't know my pharmacy fax."
        early = ok(agent.post(f"{call}/say", json={"text": "Okay, goodbye."}))
        assert early["status"] == "active" and "is my request taken care of" in words(early)
        done = ok(
            agent.post(f"{call}/say", json={"text": "Your refill is approved and sent to the pharmacy."})
        )
        assert done["status"] == "ended" and [t["kind"] for t in done["said"]] == ["speech", "signal"]
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert completed["verdict"] == "pass", completed["checks"]
    assert completed["checks"][0]["evidence"]["calls"][0]["figures"]["caller_outcome"] == "stop"


def test_an_unanswered_caller_is_missed_and_a_simulator_fault_is_an_error_not_a_failure(
    server: Server, api: httpx.Client, monkeypatch: Any
) -> None:
    from assay.sandboxes.voice.line import caller

    missed_id, missed_token, _ = start_call_task(server, api, {"incoming": [REFILL]}, criteria=[CONFIRMED])
    with server.client(missed_token) as agent:
        missed = ok(agent.post(f"/v1/task-runs/{missed_id}/complete"))
    assert missed["verdict"] == "fail" and missed["checks"][0]["status"] == "ok"
    assert missed["checks"][0]["evidence"]["calls"][0]["fields"]["caller_outcome"]["actual"] is None

    def broken(turn: Any, text: str) -> None:
        raise KeyError("persona")

    monkeypatch.setattr(caller, "reply", broken)  # the server runs in this process
    task_run_id, token, started = start_call_task(server, api, {"incoming": [REFILL]}, criteria=[CONFIRMED])
    with server.client(token) as agent:
        call = _ringing(agent, started)
        ok(agent.post(f"{call}/answer"))
        faulted = ok(agent.post(f"{call}/say", json={"text": "How can I help?"}))
        assert faulted["status"] == "ended" and faulted["said"][-1]["kind"] == "fault"
        completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert completed["checks"][0]["status"] == "error"
    assert "simulated caller failed" in completed["checks"][0]["details"]


def _persona_settings(stub: str, timeout: float) -> dict[str, Json]:
    """The voice surface's settings for the persona model at `stub` (`ASSAY_SIM_*`)."""
    return {"voice": {"sim_url": f"{stub}/v1", "sim_model": "stub", "sim_timeout": timeout}}


def _persona_model() -> tuple[Any, list[Json]]:
    """An OpenAI-compatible stub: the representative gets "Sure." before its words, except a copay,
    which it misquotes (the guard must throw that away); the caller's persona is down (HTTP 503)."""
    app, asked = FastAPI(), []

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> JSONResponse:
        body = await request.json()
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        asked.append(body)
        if "patient calling" in system:
            return JSONResponse({"error": "down"}, status_code=503)
        words = "The copay is $99.00." if "copay" in user else f"Sure. {user}"
        return JSONResponse(
            {"model": "stub", "choices": [{"message": {"role": "assistant", "content": words}}]}
        )

    return app, asked


def test_the_llm_persona_rewords_within_the_facts_is_recorded_and_its_failure_is_an_error(
    server: Server, api: httpx.Client
) -> None:
    from tests.sandboxes.conftest import serve
    from tests.service.conftest import serving

    app, asked = _persona_model()
    for stub in serve(app):
        with serving(server, surface_settings=_persona_settings(stub, 10)) as voiced:
            line = {"rep": {"llm": True}, "incoming": [{**REFILL, "llm": True}]}
            task_run_id, token, started = start_call_task(voiced, api, line, criteria=[CONFIRMED])
            with voiced.client(token) as agent:
                call, _ = dial(agent, started)
                hello = words(ok(agent.post(f"{call}/dtmf", json={"digits": "0"})))
                assert "line. Sure. Thank you for calling Acme Health" in hello  # the IVR is not reworded
                ok(agent.post(f"{call}/say", json={
                    "text": "This is Dr. Rivera, NPI 1234567893, member M1001, born 1980-04-02."
                }))  # fmt: skip
                copay = words(ok(agent.post(f"{call}/say", json={"text": "What is the copay?"})))
                assert "$25.00" in copay and "$99.00" not in copay  # the misquote was thrown away
                inbound = next(
                    c
                    for c in ok(agent.get(f"{started['endpoints']['voice']}/calls"))["data"]
                    if c["direction"] == "inbound"
                )
                faulted = ok(agent.post(f"{started['endpoints']['voice']}/calls/{inbound['call_id']}/answer"))
                assert faulted["status"] == "ended" and faulted["said"][-1]["kind"] == "fault"
                completed = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
            assert completed["checks"][0]["status"] == "error"
            transcript_asks = len(asked)
            rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
            assert rescored["checks"][0]["status"] == "error" and len(asked) == transcript_asks


def _held_persona_model() -> tuple[FastAPI, threading.Event, threading.Event, list[str]]:
    """An OpenAI-compatible stub that holds each answer until the test releases it (or 15 s pass):
    `asked` is set when a request arrives; it rewords with "Sure." before the words."""
    app, asked, release, heard = FastAPI(), threading.Event(), threading.Event(), []

    @app.post("/v1/chat/completions")
    def complete(body: dict[str, Any]) -> JSONResponse:  # a worker thread: it may block
        heard.append(body["messages"][1]["content"])
        asked.set()
        release.wait(15)
        words = f"Sure. {body['messages'][1]['content']}"
        return JSONResponse(
            {"model": "stub", "choices": [{"message": {"role": "assistant", "content": words}}]}
        )

    return app, asked, release, heard


def test_the_persona_model_is_asked_outside_the_lock_and_a_hang_up_meanwhile_wins(
    server: Server, api: httpx.Client
) -> None:
    from tests.sandboxes.conftest import serve
    from tests.service.conftest import serving

    app, asked, release, heard = _held_persona_model()
    for stub in serve(app):
        with serving(server, surface_settings=_persona_settings(stub, 30)) as voiced:
            _, token, started = start_call_task(voiced, api, {"rep": {"llm": True}})
            with voiced.client(token) as agent, voiced.client(token) as other, ThreadPoolExecutor(1) as pool:
                call, _ = dial(agent, started)
                to_the_rep = pool.submit(agent.post, f"{call}/dtmf", json={"digits": "0"})
                assert asked.wait(30), "the representative's greeting goes to the persona model"
                # While the model thinks, the line serves another call and this one's hang-up.
                second, hello = dial(other, started)
                assert "press 1" in words(hello)
                assert "National Provider Identifier" in words(
                    ok(other.post(f"{second}/dtmf", json={"digits": "1"}))
                )
                hung_up = ok(other.post(f"{call}/hangup"))
                assert hung_up["status"] == "ended" and not to_the_rep.done()
                release.set()
                # The keys were pressed on a call that had ended by the time the words came.
                error(to_the_rep.result(30), 409, "CONFLICT")
                turns = ok(agent.get(call))["turns"]
            assert [(t["speaker"], t["kind"]) for t in turns][-1] == ("agent", "hangup")
            assert not [t for t in turns if t["kind"] == "dtmf"]  # nothing of the refused action
            assert len(heard) == 1 and "Thank you for calling" in heard[0]


def test_joining_a_ringing_call_on_the_stream_answers_it(server: Server, api: httpx.Client) -> None:
    from websockets.sync.client import connect

    _, token, started = start_call_task(server, api, {"incoming": [REFILL]})
    with server.client(token) as agent:
        call = _ringing(agent, started)
    url = server.url.replace("http://", "ws://") + call + "/stream"
    with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        assert [json.loads(ws.recv(timeout=30))["event"] for _ in range(2)] == ["connected", "start"]
        assert _spoken(_frames(ws)) == "Hi, this is Pat Kim. I need a refill authorization for my lisinopril."
        ws.send(json.dumps({"event": "media", "media": {"text": "Done, your refill is approved."}}))
        end = _frames(ws)
        assert [f["event"] for f in end] == ["media", "mark", "stop"] and end[1]["mark"]["name"] == "signal"


def test_a_line_is_validated_at_dataset_create(api: httpx.Client) -> None:
    bad = {
        "number": "555",
        "rep": {"behaviours": ["sing"]},
        "ivr": {
            "start": "main",
            "nodes": {"main": {"type": "menu", "prompt": "Hi", "options": [{"dtmf": "1", "next": "gone"}]}},
        },
    }
    details = error(
        api.post("/datasets", json={"name": unique("v"), "type": "voice", "data": {"line": bad}}),
        422,
        "VALIDATION_ERROR",
    )
    assert {"data.line.number", "data.line.rep.behaviours.0", "data.line.ivr"} <= set(details), details
    assert "'gone', which is not a node" in details["data.line.ivr"][0]
    unknown = error(
        api.post("/datasets", json={"name": unique("v"), "type": "voice", "data": {"lines": {}}}),
        422,
        "VALIDATION_ERROR",
    )
    assert "data.lines" in unknown
