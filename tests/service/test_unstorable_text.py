"""Text the database cannot store gets the same answer on SQLite and PostgreSQL.

A NUL (U+0000) in a name was 201 on SQLite (stored) and 422 on PostgreSQL ("a value is too large",
empty `details`: psycopg refuses the insert); a lone surrogate was already refused everywhere. Now
both are refused where the body enters, 422 `VALIDATION_ERROR` naming the key, and a NUL in a path
or query parameter is 400 `BAD_REQUEST` naming the parameter, on both backends (`server` runs each
test on SQLite, and on PostgreSQL when `ASSAY_TEST_POSTGRES_URL` is set, as CI does).

The protocol surfaces refuse it in their own terms, every attempt logged as an event: an HL7
message with a NUL is `AR` (ERR 102) over HTTP and MLLP alike, an X12 request a TA1 note 024;
the FHIR surface keeps it (its JSON text holds the escape); a refused voice turn is an event.
"""

from __future__ import annotations

import json
import socket
import time

import httpx

from assay.formats.hl7 import parse_message
from assay.formats.x12 import parse_x12
from assay.sandboxes.hl7.ack import NUL_PROBLEM
from assay.store.json_values import NUL_TEXT, not_strict_json, storable_json_problem, strict_json_problem
from tests.sandboxes.payer.samples import PAYER
from tests.sandboxes.portal.world import MRI_APPROVED, start_portal_task
from tests.sandboxes.test_hl7_surface import adt, msa, start_hl7
from tests.sandboxes.x12.requests import eligibility_270, interchange, subscriber_270

from .builders import error, make_benchmark, make_dataset, ok, unique
from .conftest import Json, Server

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


def _events(api: httpx.Client, task_run_id: str, kind: str) -> list[Json]:
    """The run's events of `kind` (the event writer is asynchronous: waits up to 5 s for them)."""
    deadline = time.monotonic() + 5
    while True:
        events = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 100}))["data"]
        found = [e for e in events if e["type"] == kind]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_an_hl7_message_with_a_nul_is_ar_102_and_logged_over_http_and_mllp(
    server: Server, api: httpx.Client
) -> None:
    """Was `AA` (stored) on SQLite and `AR 207` (unlogged, a psycopg error) on PostgreSQL."""
    started = start_hl7(server, api)
    poisoned = adt(started.facility, "NUL-HTTP", family="SM\x00ITH")
    with server.client(started.token) as agent:
        outbound = f"/v1/task-runs/{started.task_run_id}/hl7/outbound"
        answered = agent.post(
            outbound, content=poisoned, headers={"Content-Type": "x-application/hl7-v2+er7"}
        )
        assert answered.status_code == 200
        ack = parse_message(answered.text)
        assert (ack.read("MSA.1").value, ack.read("MSA.2").value) == ("AR", "NUL-HTTP")
        assert ack.read("ERR.3.1").value == "102" and "NUL" in str(ack.read("ERR.8").value)
        as_json = agent.post(outbound, json={"payload": adt(started.facility, "NUL-JSON", family="\x00")})
        assert msa(as_json.text) == ("AR", NUL_PROBLEM)
    with socket.create_connection(("127.0.0.1", started.port), timeout=30) as sock:
        sock.sendall(b"\x0b" + adt(started.facility, "NUL-MLLP", family="A\x00B").encode() + b"\x1c\x0d")
        answer = b""
        while not answer.endswith(b"\x1c\x0d"):
            chunk = sock.recv(65536)
            assert chunk, "the listener closed the connection"
            answer += chunk
        assert msa(answer) == ("AR", NUL_PROBLEM)
    sent = _events(api, started.task_run_id, "hl7_outbound")
    deadline = time.monotonic() + 5
    while len(sent) < 3 and time.monotonic() < deadline:
        sent = _events(api, started.task_run_id, "hl7_outbound")
    assert sorted(e["method"] for e in sent) == ["MLLP", "POST", "POST"]
    assert all("MSA|AR|NUL-" in str(e["response"]) for e in sent)
    assert any("SM\x00ITH" in str(e["request"]) for e in sent)  # the attempt as sent
    with server.client(started.token) as agent:
        completed = ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
    assert completed["verdict"] != "pass"  # nothing of them was stored for grading
    assert completed["checks"][0]["evidence"]["control_id"] is None


def test_an_x12_request_with_a_nul_is_a_ta1_024_and_logged(server: Server, api: httpx.Client) -> None:
    """Was a 271 on SQLite and a 422 on PostgreSQL; X12 always answers in its own terms."""
    dataset = make_dataset(api, "x12", PAYER)
    catalog = make_benchmark(api, [[]])
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"dataset_ids": [dataset["id"]]}))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    inquiry = interchange(
        "270", eligibility_270(subscriber_270("W123456789", trace="T\x00RACE", last="DOE", first="JANE"))
    )
    with server.client(run["bearer_token"]) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["x12"]
        answered = agent.post(f"{base}/270", content=inquiry, headers={"Content-Type": "application/edi-x12"})
    assert answered.status_code == 200, answered.text
    assert answered.headers["x-assay-x12-response"] == "TA1" and "\x00" not in answered.text
    [reply] = parse_x12(answered.content).interchanges
    [ta1] = [segment for segment in reply.other if segment.id == "TA1"]
    assert (ta1.element(1), ta1.element(4), ta1.element(5)) == ("000000905", "R", "024")
    [event] = _events(api, task_run["id"], "x12_exchange")
    assert event["status"] == 200 and "T\x00RACE" in str(event["request"])


def test_a_refused_voice_turn_is_logged(server: Server, api: httpx.Client) -> None:
    dataset = {"name": unique("voice"), "type": "voice", "data": {"turns": []}}
    dataset_id = ok(api.post("/datasets", json=dataset), 201)["id"]
    catalog = make_benchmark(api, [[]])
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"dataset_ids": [dataset_id]}))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        turns = ok(agent.post(task_run["start_url"]))["endpoints"]["voice"] + "/turns"
        error(agent.post(turns, json={"speaker": "agent", "text": "a\x00b"}), 422, "VALIDATION_ERROR")
        ok(agent.post(turns, json={"speaker": "agent", "text": "ab"}), 201)
    logged = _events(api, task_run["id"], "voice_turn")
    deadline = time.monotonic() + 5
    while len(logged) < 2 and time.monotonic() < deadline:
        logged = _events(api, task_run["id"], "voice_turn")
    assert [e["status"] for e in logged] == [422, 201]
    assert logged[0]["request"] == {"speaker": "agent", "text": "a\x00b"}


def test_fhir_keeps_a_nul_alike_on_both_backends(server: Server, api: httpx.Client) -> None:
    """The FHIR surface stores JSON as JSON text, where a NUL is the escape `\\u0000`."""
    catalog = make_benchmark(api, [[]])
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        fhir = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        patient = {"resourceType": "Patient", "name": [{"family": "Nu\x00ll"}]}
        created = agent.post(
            f"{fhir}/Patient", json=patient, headers={"Content-Type": "application/fhir+json"}
        )
        assert created.status_code == 201, created.text
        read = ok(agent.get(f"{fhir}/Patient/{created.json()['id']}"))
    assert read["name"] == [{"family": "Nu\x00ll"}]


def test_a_files_path_with_a_nul_is_a_400_naming_it(server: Server, api: httpx.Client) -> None:
    dataset = make_dataset(api, "files", {"files": [{"path": "inbox/a.txt", "content": "a"}]})
    catalog = make_benchmark(api, [[]])
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json={"dataset_ids": [dataset["id"]]}))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        files = ok(agent.post(task_run["start_url"]))["endpoints"]["files"]
        refused = agent.put(f"{files}/out/a%00b.txt", content=b"\x00binary content is kept\x00")
        error(refused, 400, "BAD_REQUEST")
        assert "control character" in refused.json()["error"]["message"]
        stored = agent.put(f"{files}/out/ab.txt", content=b"\x00binary content is kept\x00")
        assert stored.status_code == 201, stored.text
        assert agent.get(f"{files}/out/ab.txt").content == b"\x00binary content is kept\x00"
    logged = _events(api, task_run["id"], "file_upload")
    deadline = time.monotonic() + 5
    while len(logged) < 2 and time.monotonic() < deadline:
        logged = _events(api, task_run["id"], "file_upload")
    assert sorted((e["status"], e["request"]["path"]) for e in logged) == [
        (201, "out/ab.txt"),
        (400, "out/a\x00b.txt"),
    ]
