"""The payer phone line: what a turn costs in-process, and 100 concurrent calls over HTTP.

    uv run python bench/bench_voice_line.py [--rounds 200] [--calls 100] [--pace 1.0]
        [--calls-each 1] [--database-url URL]

1. The line alone: p50/p99 of one `step` of the pure state machine (`line/call.py`) over a scripted
   call (keys through the IVR, verification, four questions), no SQL, no HTTP.

2. One turn in-process, the target's "in-process" figure: the same script's actions posted through
   the ASGI app (Starlette's TestClient, no network) to a started task run, so each turn pays the
   run token's check, the write gate, the call's row, the line, the transcript rows and the event:
   p50/p99, and the SQL statements and transactions per turn counted on the engine (the event
   log's writer included, which batches events off the request path; `BEGIN` not counted as a
   statement).

3. `assay serve` in its own process (bench/_serve.py; SQLite unless `--database-url`), one started
   task run with the default IVR and a payer, N callers each in its own thread and client:

   a. Paced calls — the target "100 concurrent calls, p99 < 100 ms per turn". A phone call is not a
      closed loop: each side speaks after the other has finished. Each caller places its call,
      waits for the line's answer, then speaks for `--pace` seconds ± 50 % (uniform) before its
      next action. Real turns are slower than that: the line's prompts play at 350 ms a word
      (`MS_PER_WORD`; "press 1 for eligibility…" lasts 3–10 s), a voice agent answers 0.5–1.5 s
      after the line stops, and its own words take seconds to say, so one action every 5–10 s per
      call is what a real line sees. 1 s ± 0.5 s is a conservative pace (≈ 5× a real call's
      rate, 100 calls offering ≈ 100 turns/s), not one tuned to pass. The callers dial at
      uniformly spread instants within the first pace interval, as calls do not all connect in
      the same millisecond (the burst is part c's). Reported: each turn's round trip p50/p99, the
      turns per second achieved, and the server's CPU per turn.

   b. Closed loop — capacity, not a call's experience: the same N callers with no pause between
      a turn and the next, so N threads (and the client itself) saturate the 2 cores. Reported:
      turns per second (the line's throughput on this machine), the round trip p50/p99 under that
      saturation, and the server's CPU per turn (its processes' user + system time over the phase,
      from /proc, divided by the turns).

   A 503 (SQLite's write lock not had within its wait) is retried after its `Retry-After`, as a
   client does: the turn's round trip includes the wait, and each phase reports how many it met.

   c. The peer: `GET /healthz` on the same server over one kept-alive connection, after the
      calls: what the framework and the network cost.

Targets: a turn p50 < 20 ms in-process; 100 concurrent calls with p99 < 100 ms per turn (3a).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _serve import assay_serve

from assay.sandboxes.events import flush_events
from assay.sandboxes.payer import parse_payer
from assay.sandboxes.voice.line.call import Facts, begin, step
from assay.sandboxes.voice.line.config import Line
from assay.service.app import create_app
from assay.service.settings import Settings

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
Post = Callable[..., Any]


def line_alone(rounds: int) -> list[float]:
    line, facts = Line.model_validate(LINE), Facts(parse_payer(PAYER))
    times = []
    for n in range(rounds):
        state, _ = begin(line, facts, f"call_{n}", datetime.now(UTC))
        for action, value in SCRIPT:
            started = time.perf_counter()
            step(line, facts, state, action, value, 300)
            times.append((time.perf_counter() - started) * 1000)
    return times


def started_run(post: Post) -> tuple[dict[str, str], str, str, str]:
    """(agent headers, voice base path, phone number, task run id) of a started call task."""

    def made(path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        answer = post(path, json=body, headers=headers)
        assert answer.status_code in (200, 201), answer.text
        return answer.json()

    ids = [
        made("/datasets", {"name": f"b{uuid.uuid4().hex}", "type": kind, "data": data})["id"]
        for kind, data in (("x12", PAYER), ("voice", {"line": LINE}))
    ]
    benchmark = made("/benchmarks", {"name": f"line {uuid.uuid4().hex}"})
    made("/tasks", {"benchmark_id": benchmark["id"], "name": "call", "dataset_ids": ids})
    run = made("/v1/benchmark-runs", {"benchmark_id": benchmark["id"]})
    agent = {"Authorization": f"Bearer {run['bearer_token']}"}
    task_run_id = run["task_runs"][0]["id"]
    started = made(f"/v1/task-runs/{task_run_id}/start", {}, agent)
    return agent, started["endpoints"]["voice"], started["credentials"]["voice"]["phone_number"], task_run_id


BUSY = {"refused": 0}
"""503s met (`Busy`: the SQLite write lock not had within its wait): each is retried after its
`Retry-After`, as a client does, and the turn's round trip includes the wait."""


def _posted(post: Post, path: str, body: dict[str, Any], status: int) -> Any:
    while True:
        answer = post(path, json=body)
        if answer.status_code != 503:
            assert answer.status_code == status, answer.text
            return answer
        BUSY["refused"] += 1
        time.sleep(float(answer.headers.get("retry-after", "1")))


def one_call(post: Post, base: str, number: str, pause: Callable[[], None] | None = None) -> list[float]:
    """Each action's round trip (ms) over one call of the script, the dial included."""
    times = []
    started = time.perf_counter()
    call = _posted(post, f"{base}/calls", {"to": number}, 201).json()["call_id"]
    times.append((time.perf_counter() - started) * 1000)
    for action, value in SCRIPT:
        if pause is not None:
            pause()
        body = {"digits": value} if action == "dtmf" else {"text": value}
        started = time.perf_counter()
        _posted(post, f"{base}/calls/{call}/{action}", body, 200)
        times.append((time.perf_counter() - started) * 1000)
    return times


@contextmanager
def counted(engine: Any) -> Iterator[dict[str, int]]:
    counts = {"statements": 0, "transactions": 0}

    def statement(conn: Any, cursor: Any, text: str, *args: Any) -> None:
        if not text.lstrip().upper().startswith("BEGIN"):
            counts["statements"] += 1

    def began(conn: Any) -> None:
        counts["transactions"] += 1

    event.listen(engine, "before_cursor_execute", statement)
    event.listen(engine, "begin", began)
    try:
        yield counts
    finally:
        event.remove(engine, "before_cursor_execute", statement)
        event.remove(engine, "begin", began)


def in_process(rounds: int, database_url: str | None) -> tuple[list[float], float, float]:
    """Turn round trips through the ASGI app, and SQL statements and transactions per turn."""
    key = "vk_bench_" + uuid.uuid4().hex
    with tempfile.TemporaryDirectory() as data:
        settings = Settings(
            data_dir=Path(data), bootstrap_api_key=key, sweep_interval=0, database_url=database_url
        )
        app = create_app(settings)
        with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
            agent, base, number, _ = started_run(client.post)
            client.headers.update(agent)
            one_call(client.post, base, number)  # warm: the payer parsed, statements compiled
            engine = app.state.database.engine
            flush_events(engine)
            times: list[float] = []
            with counted(engine) as counts:
                for _ in range(rounds):
                    times += one_call(client.post, base, number)
                flush_events(engine)
    return times, counts["statements"] / len(times), counts["transactions"] / len(times)


def server_cpu(pid: int) -> float:
    """User + system seconds of every process in the server's session (`serve` and its children)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == pid:  # field 6 of stat: the session id
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def callers(
    url: str, agent: dict[str, str], base: str, number: str, calls: int, each: int, pace: float | None
) -> tuple[list[float], float]:
    """Every turn's round trip over `calls` concurrent callers, and the phase's wall time."""
    turns: list[float] = []
    lock, barrier = threading.Lock(), threading.Barrier(calls + 1)

    def caller(seed: int) -> None:
        rng = random.Random(seed)

        def speak() -> None:
            assert pace is not None
            time.sleep(pace * rng.uniform(0.5, 1.5))

        mine: list[float] = []
        with httpx.Client(base_url=url, headers=agent, timeout=120) as client:
            barrier.wait()
            if pace is not None:
                time.sleep(rng.uniform(0, pace))
            for _ in range(each):
                mine += one_call(client.post, base, number, speak if pace is not None else None)
        with lock:
            turns.extend(mine)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(calls)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return turns, time.perf_counter() - started


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _line(label: str, values: list[float], extra: str = "") -> str:
    return (
        f"{label:<52} n={len(values):>6}  p50 {statistics.median(values):8.3f} ms"
        f"  p99 {_p(values, 0.99):8.3f} ms{extra}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=200, help="scripted calls in parts 1 and 2")
    parser.add_argument("--calls", type=int, default=100, help="concurrent calls in part 3")
    parser.add_argument("--calls-each", type=int, default=1, help="calls each caller places in part 3")
    parser.add_argument("--pace", type=float, default=1.0, help="mean seconds a paced caller speaks")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    print(
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"{'PostgreSQL' if args.database_url else 'SQLite'}"
    )
    print(_line("1. line step alone", line_alone(args.rounds)))
    times, statements, transactions = in_process(args.rounds, args.database_url)
    print(
        _line(
            "2. one turn in-process (ASGI app, SQL, event)",
            times,
            f"  {statements:.1f} statements, {transactions:.1f} transactions per turn",
        )
    )
    over_http(args)


def over_http(args: argparse.Namespace) -> None:
    key = "vk_bench_" + uuid.uuid4().hex
    with (
        tempfile.TemporaryDirectory() as data,
        assay_serve(Path(data), key, database_url=args.database_url) as (url, pid),
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as api,
    ):
        agent, base, number, task_run_id = started_run(api.post)
        with httpx.Client(base_url=url, headers=agent, timeout=120) as warm:
            one_call(warm.post, base, number)
        phases = [("3a. paced calls", args.pace), ("3b. closed loop (saturation)", None)]
        for label, pace in phases:
            cpu, BUSY["refused"] = server_cpu(pid), 0
            turns, wall = callers(url, agent, base, number, args.calls, args.calls_each, pace)
            cpu = server_cpu(pid) - cpu
            load = os.getloadavg()[0]
            paced = f" at {pace:g} s ± 50 %" if pace is not None else ""
            print(
                _line(f"{label}, {args.calls} calls{paced}", turns)
                + f"\n{'':<55}{len(turns) / wall:7.1f} turns/s, server CPU {cpu * 1000 / len(turns):.2f}"
                f" ms per turn, {BUSY['refused']} busy (503) retried, load average {load:.2f}"
            )
        peer = []
        for _ in range(200):
            started = time.perf_counter()
            api.get("/healthz")  # kept alive, as the callers' clients are
            peer.append((time.perf_counter() - started) * 1000)
        api.post(f"/v1/task-runs/{task_run_id}/complete", headers=agent)
    print(_line("3c. peer: GET /healthz", peer))


if __name__ == "__main__":
    main()
