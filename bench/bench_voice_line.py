"""The payer phone line: time per turn in-process, and under concurrent calls over HTTP.

    uv run python bench/bench_voice_line.py [--rounds 200] [--calls 100] [--database-url URL]

Part 1 — the line alone: p50 and p99 of one `step` of the pure state machine (`line/call.py`)
over a scripted call (keys through the IVR, verification, four questions), no SQL, no HTTP.

Part 2 — `assay serve` in its own process (bench/_serve.py; SQLite unless `--database-url`): one
started task run with the default IVR and a payer, then N calls placed at once, each from its own
thread and client, each walking the same script; every turn's round trip is timed. The peer is
`GET /healthz` on the same server, timed the same way: what the framework and the network cost.

Targets: a turn p50 < 20 ms in-process; 100 concurrent calls with p99 < 100 ms per turn.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _serve import assay_serve

from assay.sandboxes.payer import parse_payer
from assay.sandboxes.voice.line.call import Facts, begin, step
from assay.sandboxes.voice.line.config import Line

PAYER = {
    "payer": {"id": "ACME01", "name": "Acme Health"},
    "members": [
        {"member_id": "M1001", "first_name": "Ann", "last_name": "Lee", "birth_date": "1980-04-02",
         "plan": "Gold PPO", "coverage": {"start": "2026-01-01", "end": "2026-12-31"},
         "benefits": [{"service_type": "30", "coverage": "active", "copay": 25, "deductible": 1500,
                       "deductible_remaining": 600, "coinsurance": 0.2, "in_network": True}]},
    ],
}  # fmt: skip
LINE = {"clock_start": "2026-05-04T15:00:00+00:00"}
SCRIPT = [
    ("dtmf", "1"), ("dtmf", "1234567893"), ("dtmf", "1"), ("say", "M 1 0 0 1"), ("dtmf", "1"),
    ("dtmf", "04021980"), ("dtmf", "1"), ("say", "This is Dr. Rivera."), ("say", "What is the copay?"),
    ("say", "And the deductible?"), ("say", "Coinsurance?"), ("say", "That's all, goodbye."),
]  # fmt: skip


def in_process(rounds: int) -> list[float]:
    line, facts = Line.model_validate(LINE), Facts(parse_payer(PAYER))
    times = []
    for n in range(rounds):
        state, _ = begin(line, facts, f"call_{n}", datetime.now(UTC))
        for action, value in SCRIPT:
            started = time.perf_counter()
            step(line, facts, state, action, value, 300)
            times.append((time.perf_counter() - started) * 1000)
    return times


def over_http(url: str, key: str, calls: int) -> tuple[list[float], list[float]]:
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    ids = [
        api.post("/datasets", json={"name": f"b{uuid.uuid4().hex}", "type": kind, "data": data}).json()["id"]
        for kind, data in (("x12", PAYER), ("voice", {"line": LINE}))
    ]
    benchmark = api.post("/benchmarks", json={"name": f"line {uuid.uuid4().hex}"}).json()
    task = api.post(
        "/tasks", json={"benchmark_id": benchmark["id"], "name": "call", "dataset_ids": ids}
    ).json()
    run = api.post("/v1/benchmark-runs", json={"benchmark_id": task["benchmark_id"]}).json()
    token, task_run_id = run["bearer_token"], run["task_runs"][0]["id"]
    agent_headers = {"Authorization": f"Bearer {token}"}
    started = httpx.post(f"{url}/v1/task-runs/{task_run_id}/start", headers=agent_headers, timeout=120).json()
    base, number = started["endpoints"]["voice"], started["credentials"]["voice"]["phone_number"]
    turns: list[float] = []
    lock, barrier = threading.Lock(), threading.Barrier(calls)

    def one_call() -> None:
        mine = []
        with httpx.Client(base_url=url, headers=agent_headers, timeout=120) as agent:
            barrier.wait()
            t = time.perf_counter()
            call = agent.post(f"{base}/calls", json={"to": number}).json()["call_id"]
            mine.append((time.perf_counter() - t) * 1000)
            for action, value in SCRIPT:
                body = {"digits": value} if action == "dtmf" else {"text": value}
                t = time.perf_counter()
                answer = agent.post(f"{base}/calls/{call}/{action}", json=body)
                mine.append((time.perf_counter() - t) * 1000)
                assert answer.status_code == 200, answer.text
        with lock:
            turns.extend(mine)

    threads = [threading.Thread(target=one_call) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peer = []
    for _ in range(200):
        t = time.perf_counter()
        httpx.get(f"{url}/healthz")
        peer.append((time.perf_counter() - t) * 1000)
    httpx.post(f"{url}/v1/task-runs/{task_run_id}/complete", headers=agent_headers, timeout=120)
    return turns, peer


def _line(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{label:<44} n={len(values):>6}  p50 {statistics.median(values):8.3f} ms  p99 {p99:8.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    print(f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}")
    print(_line("line step, in-process", in_process(args.rounds)))
    key = "vk_bench_" + uuid.uuid4().hex
    with (
        tempfile.TemporaryDirectory() as data,
        assay_serve(Path(data), key, database_url=args.database_url) as (url, _),
    ):
        turns, peer = over_http(url, key, args.calls)
    print(_line(f"turn over HTTP, {args.calls} concurrent calls", turns))
    print(_line("peer: GET /healthz", peer))


if __name__ == "__main__":
    main()
