"""The HL7v2 sandbox end to end (issue 10 §2): datasets, the inbox, `POST hl7/outbound` and the MLLP
listener (python-hl7's own `MLLPClient`, and a raw socket), scored by `complete`, `rescore`, the
state tar.gz and `assay verify` alike."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from hl7.client import MLLPClient
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.formats.hl7 import parse_message
from tests.service.builders import criterion, error, make_benchmark, make_dataset, ok
from tests.service.conftest import Server

Json = dict[str, Any]

INBOX_ADT = (
    "MSH|^~\\&|REG|HOSP|AGENT|CLINIC|20260301120000||ADT^A04^ADT_A01|IN-1|P|2.5.1\r"
    "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
)


def adt(facility: str, control: str = "OUT-1", family: str = "SMITH") -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|{control}|P|2.5.1\r"
        "EVN|A08|20260301120500\r"
        f"PID|1||MRN123^^^HOSP^MR||{family}^JOHN||19800101|M\r"
    )


UPDATED = {
    "assert": "hl7-structural",
    "correlate_by": {"message_type": "ADT^A08"},
    "fields": [{"path": "PID.5.1", "expected": "SMITH"}, {"path": "PID.3.1", "expected": "MRN123"}],
}


@dataclass
class Started:
    task_run_id: str
    token: str
    body: Json

    @property
    def facility(self) -> str:
        return str(self.body["credentials"]["hl7"]["receiving_facility"])

    @property
    def port(self) -> int:
        return int(self.body["credentials"]["hl7"]["port"])


def start_hl7(server: Server, api: httpx.Client, *, scenario: list[Json] | None = None) -> Started:
    dataset = make_dataset(api, "hl7", {"inbox": [INBOX_ADT]})
    catalog = make_benchmark(api, [[criterion(UPDATED)]])
    body: Json = {"dataset_ids": [dataset["id"]]}
    if scenario:
        body["scenario"] = scenario
    ok(api.patch(f"/tasks/{catalog.task_ids[0]}", json=body))
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(task_run["start_url"]))
    return Started(task_run["id"], run["bearer_token"], started)


@contextmanager
def agent_of(server: Server, started: Started) -> Iterator[httpx.Client]:
    with server.client(started.token) as agent:
        yield agent


def msa(ack: bytes | str) -> tuple[str | None, str | None]:
    text = ack.decode() if isinstance(ack, bytes) else ack
    message = parse_message(text)
    return message.read("MSA.1").value, message.read("ERR.8").value


def test_start_advertises_the_mllp_port_and_facility(server: Server, api: httpx.Client) -> None:
    started = start_hl7(server, api)
    base = f"/v1/task-runs/{started.task_run_id}"
    assert started.body["endpoints"]["hl7_inbox"] == f"{base}/hl7/inbox"
    assert started.body["endpoints"]["hl7_outbound"] == f"{base}/hl7/outbound"
    assert started.port > 0 and started.facility.startswith("ASSAY-")
    assert started.body["credentials"]["hl7"]["host"] == "127.0.0.1"


def test_the_inbox_holds_the_dataset_then_the_scenario_messages(server: Server, api: httpx.Client) -> None:
    second = INBOX_ADT.replace("IN-1", "IN-2").replace("\r", "\n")
    started = start_hl7(server, api, scenario=[{"step": "seed_hl7_inbox", "message": second}])
    with agent_of(server, started) as agent:
        inbox = ok(agent.get(started.body["endpoints"]["hl7_inbox"]))["data"]
    assert [parse_message(m["message"]).control_id.value for m in inbox] == ["IN-1", "IN-2"]
    assert all(m["id"].startswith("hl7_") and m["received_at"].endswith("Z") for m in inbox)


def test_a_bad_scenario_message_fails_the_start(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(UPDATED)]])
    ok(
        api.patch(
            f"/tasks/{catalog.task_ids[0]}", json={"scenario": [{"step": "seed_hl7_inbox", "message": "hi"}]}
        )
    )
    run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": catalog.benchmark_id}), 201)
    with server.client(run["bearer_token"]) as agent:
        details = error(agent.post(run["task_runs"][0]["start_url"]), 409, "CONFLICT")
    assert details["reason"].startswith("scenario step seed_hl7_inbox: message is not an HL7v2 message")


def test_an_hl7_dataset_is_validated_at_create(api: httpx.Client) -> None:
    body = {"name": "bad", "type": "hl7", "data": {"inbox": [INBOX_ADT, "not hl7", 7]}}
    details = error(api.post("/datasets", json=body), 422, "VALIDATION_ERROR")
    assert set(details) == {"data.inbox.1", "data.inbox.2"}


def test_http_outbound_answers_the_ack_of_spec_5_2(server: Server, api: httpx.Client) -> None:
    started = start_hl7(server, api)
    url = started.body["endpoints"]["hl7_outbound"]
    with agent_of(server, started) as agent:
        raw = agent.post(
            url, content=adt(started.facility), headers={"Content-Type": "x-application/hl7-v2+er7"}
        )
        assert raw.status_code == 200 and raw.headers["content-type"].startswith("x-application/hl7-v2+er7")
        assert msa(raw.text) == ("AA", None)
        as_json = agent.post(url, json={"payload": adt(started.facility, "OUT-2")})
        assert msa(as_json.text) == ("AA", None)
        missing = agent.post(url, json={"payload": adt(started.facility, "")})
        code, reason = msa(missing.text)
        assert code == "AE" and reason is not None and "MSH-10" in reason
        assert msa(agent.post(url, content=b"garbage").text)[0] == "AR"
        error(agent.post(url, json={"message": "x"}), 422, "VALIDATION_ERROR")
        completed = ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
    assert completed["verdict"] == "pass", completed
    assert completed["checks"][0]["evidence"]["control_id"] in ("OUT-1", "OUT-2")
    events = ok(api.get(f"/task-runs/{started.task_run_id}/events", params={"limit": 100}))["data"]
    assert [e["type"] for e in events] == ["hl7_outbound"] * 4


def test_mllp_a_right_agent_passes_a_wrong_one_gets_evidence(server: Server, api: httpx.Client) -> None:
    right, wrong = start_hl7(server, api), start_hl7(server, api)
    with MLLPClient("127.0.0.1", right.port) as client:
        for n in range(3):  # several messages on one connection
            assert msa(client.send_message(adt(right.facility, f"R-{n}")))[0] == "AA"
    with MLLPClient("127.0.0.1", wrong.port) as client:
        assert msa(client.send_message(adt(wrong.facility, "W-1", family="SMYTHE")))[0] == "AA"
    with agent_of(server, right) as agent:
        passed = ok(agent.post(f"/v1/task-runs/{right.task_run_id}/complete"))
    with agent_of(server, wrong) as agent:
        failed = ok(agent.post(f"/v1/task-runs/{wrong.task_run_id}/complete"))
    assert passed["verdict"] == "pass" and passed["score"] == 1
    [check] = failed["checks"]
    assert failed["verdict"] != "pass" and check["score"] == 0.5
    results = {r["path"]: r for r in check["evidence"]["field_results"]}
    assert results["PID.5.1"]["actual"] == "SMYTHE" and results["PID.5.1"]["passed"] is False
    assert check["evidence"]["control_id"] == "W-1"


def _exchange(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    answer = b""
    while not answer.endswith(b"\x1c\x0d"):
        chunk = sock.recv(65536)
        assert chunk, "the listener closed the connection"
        answer += chunk
    return answer


def test_mllp_bad_input_gets_protocol_errors_and_the_listener_stays_up(
    server: Server, api: httpx.Client
) -> None:
    started = start_hl7(server, api)
    with socket.create_connection(("127.0.0.1", started.port), timeout=30) as sock:
        assert msa(_exchange(sock, b"\x0bgarbage bytes \xff\x00\x1c\x0d"))[0] == "AR"
        code, reason = msa(_exchange(sock, b"\x0b" + b"A" * (1024 * 1024 + 10) + b"\x1c\x0d"))
        assert code == "AR" and reason is not None and "1 MB" in reason
        code, reason = msa(_exchange(sock, b"\x0b" + adt("ASSAY-NOBODY").encode() + b"\x1c\x0d"))
        assert code == "AR" and reason is not None and "ASSAY-NOBODY" in reason
        # junk between frames, and one frame split over three writes, on the same connection
        payload = adt(started.facility, "SPLIT-1").encode()
        sock.sendall(b"\r\n junk \x0b" + payload[:10])
        sock.sendall(payload[10:40])
        assert msa(_exchange(sock, payload[40:] + b"\x1c\x0d"))[0] == "AA"
    with agent_of(server, started) as agent:
        completed = ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
    assert completed["verdict"] == "pass"
    assert completed["checks"][0]["evidence"]["control_id"] == "SPLIT-1"
    with MLLPClient("127.0.0.1", started.port) as client:  # ended: AR, nothing stored
        code, reason = msa(client.send_message(adt(started.facility, "LATE")))
    assert (
        code == "AR"
        and reason is not None
        and "is completed/completed: its surfaces take no writes" in reason
    )
    rescored = ok(api.post(f"/task-runs/{started.task_run_id}/rescore"))
    assert rescored["checks"][0]["evidence"]["control_id"] == "SPLIT-1"


def test_an_mllp_frame_over_1_mb_is_refused_logged_and_the_connection_kept(
    server: Server, api: httpx.Client
) -> None:
    """The refusal is in the message's own header's terms and is an `hl7_outbound` event (its
    first MiB, `truncated`), so the run's evidence shows it; it is never a candidate."""
    started = start_hl7(server, api)
    big = adt(started.facility, "BIG-1").encode() + b"NTE|1||" + b"x" * (1024 * 1024) + b"\r"
    with socket.create_connection(("127.0.0.1", started.port), timeout=30) as sock:
        refused = _exchange(sock, b"\x0b" + big + b"\x1c\x0d")
        code, reason = msa(refused)
        assert code == "AR" and reason is not None and "over the 1 MB limit" in reason
        assert parse_message(refused.decode().strip("\x0b\x1c\r")).read("MSA.2").value == "BIG-1"
        assert (
            msa(_exchange(sock, b"\x0b" + adt(started.facility, "AFTER-1").encode() + b"\x1c\x0d"))[0] == "AA"
        )
    events = ok(api.get(f"/task-runs/{started.task_run_id}/events", params={"limit": 100}))["data"]
    sent = [e for e in events if e["type"] == "hl7_outbound"]
    assert [e["method"] for e in sent] == ["MLLP", "MLLP"]
    assert sent[0]["truncated"] is True and str(sent[0]["request"]).startswith("MSH|^~\\&|AGENT|CLINIC|LAB|")
    assert len(str(sent[0]["request"])) == 1024 * 1024 and "MSA|AR|BIG-1" in str(sent[0]["response"])
    assert sent[1]["truncated"] is False and "MSA|AA|AFTER-1" in str(sent[1]["response"])
    with agent_of(server, started) as agent:
        completed = ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
    assert completed["checks"][0]["evidence"]["control_id"] == "AFTER-1"


def test_state_rescore_and_verify_agree(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    started = start_hl7(server, api)
    with MLLPClient("127.0.0.1", started.port) as client:
        client.send_message(adt(started.facility, "A-1", family="SMYTHE"))
        client.send_message(adt(started.facility, "A-2"))
    with agent_of(server, started) as agent:
        completed = ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
    rescored = ok(api.post(f"/task-runs/{started.task_run_id}/rescore"))
    state = api.get(f"/task-runs/{started.task_run_id}/state")
    assert state.status_code == 200
    archive = tmp_path / "state.tar.gz"
    archive.write_bytes(state.content)
    task = ok(api.get(f"/tasks/{ok(api.get(f'/task-runs/{started.task_run_id}'))['task_id']}"))
    (tmp_path / "task.json").write_text(json.dumps(task))
    verified = CliRunner().invoke(cli, ["verify", str(tmp_path / "task.json"), str(archive), "--json"])
    assert verified.exit_code == 0, verified.output
    offline = json.loads(verified.stdout)
    summary = [(c["score"], c["passed"]) for c in completed["checks"]]
    assert summary == [(c["score"], c["passed"]) for c in rescored["checks"]]
    assert summary == [(c["score"], c["passed"]) for c in offline["criterion_runs"]]
    assert offline["score"] == completed["score"]


def test_a_benchmark_run_alias_reaches_the_started_task_run(server: Server, api: httpx.Client) -> None:
    started = start_hl7(server, api)
    with agent_of(server, started) as agent:
        detail = ok(api.get(f"/task-runs/{started.task_run_id}"))
        run_id = detail["benchmark_run_id"]
        inbox = ok(agent.get(f"/v1/benchmark-runs/{run_id}/hl7/inbox"))["data"]
    assert len(inbox) == 1


def test_many_mllp_connections_at_once_each_get_their_acks_and_every_message_is_stored(
    server: Server, api: httpx.Client
) -> None:
    """Each connection has its own thread (`MllpListener`); twelve senders at once, five
    messages each: every one `AA`, stored once, its event logged, the `seq`s gap-free."""
    started = start_hl7(server, api)

    def send(sender: int) -> list[str | None]:
        with MLLPClient("127.0.0.1", started.port) as client:
            return [msa(client.send_message(adt(started.facility, f"C{sender}-{n}")))[0] for n in range(5)]

    with ThreadPoolExecutor(12) as pool:
        codes = [code for codes in pool.map(send, range(12)) for code in codes]
    assert codes == ["AA"] * 60
    events = ok(api.get(f"/task-runs/{started.task_run_id}/events", params={"limit": 200}))["data"]
    sent = [e for e in events if e["type"] == "hl7_outbound"]
    assert len(sent) == 60 and all(e["method"] == "MLLP" for e in sent)
    assert sorted(e["seq"] for e in events) == list(range(1, len(events) + 1))
    with agent_of(server, started) as agent:
        completed = ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
    assert completed["verdict"] == "pass"
