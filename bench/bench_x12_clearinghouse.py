"""X12 clearinghouse benchmark: 270→271 over HTTP, p50 and p99.

    uv run python bench/bench_x12_clearinghouse.py [--requests N]

`assay serve` (one worker, SQLite, a fresh data directory) with a task whose x12 dataset is a
payer of 200 members; one started task run; then one keep-alive httpx client posts the same
270 (one subscriber, EQ*30, the member has four benefits) N times to `x12/270`, after 50 untimed
warm-up requests. Each request authenticates the run token, reads the payer (cached), takes the
sandbox's lock, answers, stores the exchange and appends the `x12_exchange` event.

Peers, in the same run: `GET /healthz` on the same server and client (the framework's floor: a
token-free route doing `SELECT 1`), a FHIR create on the same task run (the other surface whose
request is one write transaction plus its event), and the engine alone (`sandboxes.x12.respond`, in-process, no
HTTP or store). Target: 270→271 p50 < 10 ms on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_complete import KEY, serve
from tests.sandboxes.payer.samples import PAYER
from tests.sandboxes.x12.requests import eligibility_270, interchange, subscriber_270

from assay.sandboxes.payer import parse_payer
from assay.sandboxes.x12 import respond


def _payer(members: int) -> dict[str, Any]:
    jane = PAYER["members"][0]
    extra = [{**jane, "member_id": f"B{n:06d}"} for n in range(members - 1)]
    return {**PAYER, "members": [*extra, jane, *PAYER["members"][1:]]}


def _timed(count: int, call: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    payer = _payer(200)
    body = interchange(
        "270", eligibility_270(subscriber_270("W123456789", trace="B1", last="DOE", first="JANE"))
    )
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp)) as url:
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        dataset = api.post("/datasets", json={"name": "payer", "type": "x12", "data": payer}).json()
        bench = api.post("/benchmarks", json={"name": "x12 bench"}).json()
        api.post("/tasks", json={"benchmark_id": bench["id"], "name": "t", "dataset_ids": [dataset["id"]]})
        run = api.post("/v1/benchmark-runs", json={"benchmark_id": bench["id"]}).json()
        [task_run] = run["task_runs"]
        agent = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {run['bearer_token']}"}, timeout=30
        )
        started = agent.post(task_run["start_url"]).json()
        target = f"{started['endpoints']['x12']}/270"
        headers = {"Content-Type": "application/edi-x12"}

        def post() -> None:
            reply = agent.post(target, content=body, headers=headers)
            assert reply.status_code == 200 and reply.headers["x-assay-x12-response"] == "271", reply.text

        _timed(50, post)
        http = _timed(args.requests, post)
        floor = _timed(args.requests, lambda: agent.get("/healthz"))
        patient = {"resourceType": "Patient", "name": [{"family": "Doe"}]}
        fhir = _timed(
            args.requests, lambda: agent.post(f"{started['endpoints']['fhir']}/Patient", json=patient)
        )
    definition = parse_payer(payer)
    now = datetime.now(UTC)
    engine = _timed(args.requests, lambda: respond("270", body, definition, control_number=1, now=now))
    load = os.getloadavg()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load avg (1 min) {load:.1f}")
    print(f"{args.requests} requests each, one keep-alive client, SQLite, one worker")
    rows = [
        ("POST x12/270 → 271", http),
        ("GET /healthz (floor)", floor),
        ("POST fhir/Patient (create)", fhir),
        ("engine respond() alone", engine),
    ]
    http_p50 = _summary(http)[0]
    for name, times in rows:
        p50, p99 = _summary(times)
        print(f"{name:26s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  (270→271 p50 is x{http_p50 / p50:.1f})")
    print(f"target p50 < 10 ms: {'met' if http_p50 < 10 else 'NOT met'}")


if __name__ == "__main__":
    main()
