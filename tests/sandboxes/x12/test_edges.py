"""The clearinghouse's edge answers over HTTP, on SQLite and PostgreSQL: a reused interchange
control number (ISA13) in one run is a TA1 note `025`, unless the payer accepts reuse; the
refused exchange is still stored and logged; a body over the limit is 413 `PAYLOAD_TOO_LARGE`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import Any

import httpx

from assay.formats.x12 import parse_x12
from tests.service.builders import error, ok, start_run, unique
from tests.service.conftest import Server

from ..payer.samples import PAYER
from .requests import eligibility_270, interchange, subscriber_270

Json = dict[str, Any]
X12 = {"Content-Type": "application/edi-x12"}


def _inquiry(trace: str, control: int) -> str:
    body = eligibility_270(subscriber_270("W123456789", trace=trace, last="DOE", first="JANE"))
    return interchange("270", body, control=control)


def _started(server: Server, api: httpx.Client, payer: Json) -> tuple[httpx.Client, Json, str]:
    dataset = ok(api.post("/datasets", json={"name": unique("payer"), "type": "x12", "data": payer}), 201)
    benchmark = ok(api.post("/benchmarks", json={"name": unique("x12")}), 201)
    body = {"benchmark_id": benchmark["id"], "name": "eligibility", "dataset_ids": [dataset["id"]]}
    ok(api.post("/tasks", json=body), 201)
    run = start_run(api, benchmark["id"])
    [task_run] = run.task_runs
    agent = server.client(run.token)
    started = ok(agent.post(task_run["start_url"]))
    return agent, started, task_run["id"]


def _ta1(reply: httpx.Response) -> list[str]:
    [ta1] = [s for s in parse_x12(reply.content).interchanges[0].other if s.id == "TA1"]
    return [ta1.element(n) for n in range(1, 6)]


def test_a_reused_interchange_control_number_is_a_ta1_025_and_still_logged(
    server: Server, api: httpx.Client
) -> None:
    agent, started, task_run_id = _started(server, api, PAYER)
    with closing(agent):
        base = started["endpoints"]["x12"]
        first = agent.post(f"{base}/270", content=_inquiry("T-1", 31), headers=X12)
        again = agent.post(f"{base}/270", content=_inquiry("T-2", 31), headers=X12)
        other = agent.post(f"{base}/270", content=_inquiry("T-3", 32), headers=X12)
        assert [r.status_code for r in (first, again, other)] == [200, 200, 200]
        assert [r.headers["x-assay-x12-response"] for r in (first, again, other)] == ["271", "TA1", "271"]
        control, _, _, acknowledged, note = _ta1(again)
        assert (control, acknowledged, note) == ("000000031", "R", "025")
        # two interchanges of one request with one number: the second is the duplicate
        twice = _inquiry("T-4", 33) + _inquiry("T-5", 33)
        both = agent.post(f"{base}/270", content=twice, headers=X12)
        replies = parse_x12(both.content).interchanges
        assert [[s.id for s in r.other] for r in replies] == [[], ["TA1"]]
        assert replies[1].other[0].element(5) == "025" and both.headers["x-assay-x12-response"] == "271"
    events = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 20}))["data"]
    assert [(e["type"], e["status"]) for e in events] == [("x12_exchange", 200)] * 4
    assert "TA1*000000031*" in str(events[1]["response"])


def test_a_payer_may_accept_reused_control_numbers(server: Server, api: httpx.Client) -> None:
    agent, started, _ = _started(server, api, {**PAYER, "duplicate_interchange": "accept"})
    with closing(agent):
        base = started["endpoints"]["x12"]
        replies = [agent.post(f"{base}/270", content=_inquiry(f"T-{n}", 40), headers=X12) for n in range(2)]
    assert [r.headers["x-assay-x12-response"] for r in replies] == ["271", "271"]
    refused = api.post(
        "/datasets",
        json={
            "name": unique("payer"),
            "type": "x12",
            "data": {**PAYER, "duplicate_interchange": "sometimes"},
        },
    )
    assert list(error(refused, 422, "VALIDATION_ERROR")) == ["data.duplicate_interchange"]


def test_concurrent_requests_reusing_a_number_are_answered_once(server: Server, api: httpx.Client) -> None:
    """The check runs under the sandbox's lock: of eight racing requests with one ISA13, one is answered."""
    agent, started, _ = _started(server, api, PAYER)
    with closing(agent):
        base = started["endpoints"]["x12"]

        def post(n: int) -> str:
            reply = agent.post(f"{base}/270", content=_inquiry(f"R-{n}", 50), headers=X12)
            assert reply.status_code == 200, reply.text
            return reply.headers["x-assay-x12-response"]

        with ThreadPoolExecutor(8) as pool:
            kinds = sorted(pool.map(post, range(8)))
    assert kinds == ["271"] + ["TA1"] * 7


def test_a_body_over_the_limit_is_413_payload_too_large(server: Server, api: httpx.Client) -> None:
    from assay.sandboxes.x12.routes import MAX_REQUEST_BYTES

    agent, started, task_run_id = _started(server, api, PAYER)
    with closing(agent):
        big = b"ISA" + b"*" * MAX_REQUEST_BYTES
        refused = agent.post(f"{started['endpoints']['x12']}/270", content=big, headers=X12)
    error(refused, 413, "PAYLOAD_TOO_LARGE")
    events = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 10}))["data"]
    assert [(e["type"], e["status"]) for e in events] == [("x12_exchange", 413)]
