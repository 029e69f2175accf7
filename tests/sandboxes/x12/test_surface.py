"""The X12 clearinghouse end to end (issue 10 §3): dataset → start → POST x12/270 with a real HTTP
client → complete → state tar.gz → `assay verify`, on SQLite and PostgreSQL.

A scripted agent that asks the right question gets `pass`; wrong ones (an unknown member, a
truncated interchange, an ISA with wrong element widths) get the protocol's answer (AAA 75, TA1)
and a failed criterion whose evidence shows why.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from assay.clients.cli import app
from assay.formats.x12 import parse_x12
from tests.service.builders import error, ok, start_run, unique
from tests.service.conftest import Server

from ..payer.samples import PAYER
from .requests import claim_status_276, eligibility_270, interchange, review_278, subscriber_270

Json = dict[str, Any]
X12 = {"Content-Type": "application/edi-x12"}
ELIGIBLE = {
    "assert": "x12-response",
    "transaction": "271",
    "correlate_by": {"member_id": "W123456789", "trace_number": "TRACE-1"},
    "fields": [
        {"path": "2110C/EB[1]03", "expected": "30"},
        {"path": "2110C/EB[B]07", "expected": 25},
        {"path": "2100C/NM1[IL]03", "expected": "Doe"},
    ],
}
APPROVED = {
    "assert": "x12-response",
    "transaction": "278",
    "correlate_by": {"member_id": "W123456789"},
    "fields": [{"path": "2000F/HCR01", "expected": "A1"}],
}


def _catalog(api: httpx.Client, *assertions: Json) -> tuple[str, list[Json]]:
    dataset = ok(api.post("/datasets", json={"name": unique("payer"), "type": "x12", "data": PAYER}), 201)
    benchmark = ok(api.post("/benchmarks", json={"name": unique("x12")}), 201)
    task = ok(
        api.post(
            "/tasks",
            json={"benchmark_id": benchmark["id"], "name": "eligibility", "dataset_ids": [dataset["id"]]},
        ),
        201,
    )
    criteria = [
        {"label": f"c{i}", "assertion": assertion, "weight": 1} for i, assertion in enumerate(assertions)
    ]
    for criterion in criteria:
        ok(api.post("/criteria", json={"task_id": task["id"], **criterion}), 201)
    return benchmark["id"], criteria


def _play(
    server: Server,
    api: httpx.Client,
    bodies: list[tuple[str, str]],
    *assertions: Json,
    also_by_run: bool = False,
) -> tuple[Json, list[httpx.Response], str, list[Json]]:
    benchmark_id, criteria = _catalog(api, *assertions)
    run = start_run(api, benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        started = ok(agent.post(task_run["start_url"]))
        base = started["endpoints"]["x12"]
        assert base.endswith("/x12")
        replies = [agent.post(f"{base}/{endpoint}", content=body, headers=X12) for endpoint, body in bodies]
        if also_by_run:  # the benchmark run's base reaches its single started task run too (SPEC §5.2)
            again = agent.post(
                f"/v1/benchmark-runs/{run.id}/x12/{bodies[0][0]}", content=bodies[0][1], headers=X12
            )
            assert again.status_code == 200, again.text
            assert parse_x12(again.content).interchanges[0].control_number == f"{len(bodies) + 1:09d}"
        completed = ok(agent.post(task_run["complete_url"]))
        late = agent.post(f"{base}/270", content=bodies[0][1], headers=X12) if bodies else None
    if late is not None:
        error(late, 409, "CONFLICT")  # a task run that ended refuses traffic
    return completed, replies, task_run["id"], criteria


def _verify_offline(api: httpx.Client, task_run_id: str, criteria: list[Json], tmp_path: Path) -> Json:
    state = api.get(f"/task-runs/{task_run_id}/state")
    assert state.status_code == 200, state.text
    archive = tmp_path / "state.tar.gz"
    archive.write_bytes(state.content)
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps({"criteria": criteria}))
    result = CliRunner().invoke(app, ["verify", str(task_file), str(archive), "--json"])
    assert result.exit_code == 0, result.output
    verified: Json = json.loads(result.stdout)
    return verified


def test_a_right_270_passes_and_verify_agrees(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    request = interchange("270", eligibility_270(subscriber_270("W123456789", trace="TRACE-1", last="DOE",
                                                                first="JANE", birth="19800412")))  # fmt: skip
    completed, [reply], task_run_id, criteria = _play(server, api, [("270", request)], ELIGIBLE)
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/edi-x12"
    assert reply.headers["x-assay-x12-response"] == "271"
    [transaction] = list(parse_x12(reply.content).transactions())
    assert (
        transaction.code == "271" and parse_x12(reply.content).interchanges[0].control_number == "000000001"
    )
    assert completed["verdict"] == "pass" and completed["score"] == 1.0, completed
    [check] = completed["checks"]
    assert check["passed"] and check["evidence"]["transaction"] == "271"
    assert check["evidence"]["record_id"].startswith("x12_")
    assert [e["actual"] for e in check["evidence"]["fieldResults"]] == ["30", "25", "Doe"]

    verified = _verify_offline(api, task_run_id, criteria, tmp_path)
    assert verified["score"] == completed["score"] and verified["verdict"] == "pass"
    assert verified["criterion_runs"][0]["evidence"] == check["evidence"]
    rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
    assert rescored["score"] == completed["score"] and rescored["checks"][0]["evidence"] == check["evidence"]
    with tarfile.open(fileobj=io.BytesIO(api.get(f"/task-runs/{task_run_id}/state").content)) as tar:
        names = sorted(n for n in tar.getnames() if "/x12/" in n)
        assert names == ["snapshot/x12/000001.meta.json", "snapshot/x12/000001.request.x12",
                         "snapshot/x12/000001.response.x12"]  # fmt: skip
        stored = tar.extractfile("snapshot/x12/000001.response.x12")
        assert stored is not None and stored.read() == reply.content

    events = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 100}))["data"]
    assert [(e["type"], e["method"], e["status"]) for e in events] == [("x12_exchange", "POST", 200)]
    assert events[0]["path"].endswith("x12/270") and events[0]["request"] == request


def test_claim_status_and_review_in_one_run(server: Server, api: httpx.Client) -> None:
    claim = {
        "assert": "x12-response",
        "transaction": "277",
        "correlate_by": {"patient_control_number": "PCN001"},
        "fields": [{"path": "STC01", "expected": "F1:65"}, {"path": "STC09", "expected": "CHK5550"}],
    }
    bodies = [
        ("276", interchange("276", claim_status_276(("W123456789", "PCN001", "250")))),
        ("278", interchange("278", review_278("W123456789", "70553"), control=906)),
    ]
    completed, replies, _, _ = _play(server, api, bodies, claim, APPROVED, also_by_run=True)
    assert [r.headers["x-assay-x12-response"] for r in replies] == ["277", "278"]
    assert [parse_x12(r.content).interchanges[0].control_number for r in replies] == [
        "000000001",
        "000000002",
    ]
    assert completed["verdict"] == "pass", completed


def _failed_check(completed: Json) -> Json:
    assert completed["verdict"] == "fail", completed
    [check] = completed["checks"]
    assert check["status"] == "ok" and not check["passed"] and check["score"] == 0
    return check  # type: ignore[no-any-return]


def test_an_unknown_member_gets_aaa_75_and_fails_with_evidence(server: Server, api: httpx.Client) -> None:
    unknown = {**ELIGIBLE, "correlate_by": {"trace_number": "TRACE-1"}}
    request = interchange("270", eligibility_270(subscriber_270("W999", trace="TRACE-1")))
    completed, [reply], _, _ = _play(server, api, [("270", request)], unknown)
    [transaction] = list(parse_x12(reply.content).transactions())
    assert [str(s) for s in transaction.segments if s.id == "AAA"] == ["AAA*Y**75*C"]
    check = _failed_check(completed)
    assert [e["actual"] for e in check["evidence"]["fieldResults"]] == [None, None, None]
    assert check["details"].startswith("271 0001 in X12 response 1 matched; 0 of 3")


@pytest.mark.parametrize(
    ("mangle", "note"),
    [
        pytest.param(lambda text: text[: text.index("SE*")], "023", id="truncated"),
        pytest.param(
            lambda text: text.replace("*ZZ*AGENT01        *", "*ZZ*AGENT01*", 1), "006", id="isa-widths"
        ),
        pytest.param(lambda text: "garbage, not X12", "022", id="garbage"),
    ],
)
def test_envelope_errors_get_a_ta1_and_fail(
    server: Server, api: httpx.Client, mangle: Any, note: str
) -> None:
    request = mangle(interchange("270", eligibility_270(subscriber_270("W123456789", trace="TRACE-1"))))
    completed, [reply], _, _ = _play(server, api, [("270", request)], ELIGIBLE)
    assert reply.status_code == 200 and reply.headers["x-assay-x12-response"] == "TA1"
    [ta1] = parse_x12(reply.content).interchanges[0].other
    assert ta1.id == "TA1" and ta1.element(4) == "R" and ta1.element(5) == note
    check = _failed_check(completed)
    assert check["details"].endswith("No recorded response holds a 270/271 transaction set.")
    assert check["evidence"]["record_id"] is None


def test_a_276_posted_to_270_gets_a_999(server: Server, api: httpx.Client) -> None:
    body = interchange("276", claim_status_276(("W123456789", "PCN001", "250")))
    completed, [reply], _, _ = _play(server, api, [("270", body)], ELIGIBLE)
    assert reply.headers["x-assay-x12-response"] == "999"
    [ack] = list(parse_x12(reply.content).transactions())
    assert ack.code == "999" and [str(s) for s in ack.segments if s.id in ("IK3", "IK4")] == [
        "IK3*ST*1**8", "IK4*1*143*7*276",
    ]  # fmt: skip
    _failed_check(completed)


def test_a_payer_definition_missing_a_key_is_a_422_naming_it(api: httpx.Client) -> None:
    bad = json.loads(json.dumps(PAYER))
    del bad["members"][1]["birth_date"]
    details = error(api.post("/datasets", json={"name": unique("p"), "type": "x12", "data": bad}), 422,
                    "VALIDATION_ERROR")  # fmt: skip
    assert details == {"data.members.1.birth_date": ["missing required key 'birth_date'"]}


def test_a_request_over_the_limit_is_a_413_and_stores_nothing(server: Server, api: httpx.Client) -> None:
    from assay.sandboxes.x12.routes import MAX_REQUEST_BYTES

    benchmark_id, _ = _catalog(api, ELIGIBLE)
    run = start_run(api, benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["x12"]
        big = b"ISA" + b"*" * MAX_REQUEST_BYTES
        refused = agent.post(f"{base}/270", content=big, headers=X12)
        error(refused, 413, "PAYLOAD_TOO_LARGE")
        assert refused.json()["error"]["message"].startswith("an X12 request is at most 1048576 bytes")
        completed = ok(agent.post(task_run["complete_url"]))
    assert completed["checks"][0]["details"].endswith("No X12 exchange was recorded.")
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 10}))["data"]
    assert [(e["type"], e["status"]) for e in events] == [("x12_exchange", 413)]
