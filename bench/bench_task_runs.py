"""Throughput benchmark: whole task runs of the bundled "front office" benchmark, driven by C agents
at once, as users run a benchmark at scale.

    uv run python bench/bench_task_runs.py [--task-runs 200] [--clients 8] [--workers 1] [--postgres]

The bundled package (`src/assay/clients/demo/front_office`) is pushed and published with its
concurrency raised to `--clients`, and one benchmark run is created with enough trials for
`--task-runs` task runs (up to 350 a run: 7 tasks × 50 trials; more take several runs). Each of
the C agents (threads, a keep-alive client each) takes the next task run and does what an agent
does: `start`, 20 operations over every protocol — FHIR searches, reads and a create, an X12 270,
HL7 ADT^A08 over MLLP and over HTTP and the HL7 inbox, the files API and an SFTP session, the
payer portal's API and a voice call — then `complete`.

Prints task runs/min (over the wall time of the timed task runs, after `--warmup` untimed ones),
p50/p99 of `start`, of the operations and of `complete`, failed requests by kind, the server's CPU
per task run (the `assay serve` process group and, when local, the PostgreSQL cluster's
processes) and, for scale, a same-run hello-world: a bare FastAPI app on stock uvicorn, hit by C
keep-alive clients for `--hello-seconds` right before the task runs (requests/s and p50).
`--postgres`: PostgreSQL (`ASSAY_BENCH_POSTGRES_URL`, else a throwaway cluster, as
`bench_complete.py` does); `--workers N`: `assay serve --workers N` on either backend.
`--instances N` (PostgreSQL only): N `assay serve` processes on the one database and one storage
folder, as N instances behind a load balancer; agent i talks to instance i mod N for all of its
task runs (start, operations and complete), and the CPU figure covers every instance.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import queue
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from _serve import assay_serve
from bench_complete import KEY, postgres
from bench_load import cpu_seconds, hello_world, postmaster

from assay.client import Assay
from assay.clients.demo.agent import (
    ELIGIBILITY_270,
    PRIOR_AUTH_REQUEST,
    adt_a08,
    copy_referral,
    send_mllp,
)
from assay.clients.demo.runner import PACKAGE
from assay.clients.packages import push, read_package

MAX_TRIALS = 50
FHIR = {"Content-Type": "application/fhir+json"}
TURNS = [
    {"speaker": "agent", "text": "Hello, this is the Front Office Clinic calling for John Smith."},
    {"speaker": "caller", "text": "Speaking."},
    {"speaker": "agent", "text": "Could you confirm your member ID and date of birth?"},
]


@dataclass
class Timings:
    start: list[float] = field(default_factory=list)
    ops: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            getattr(self, kind).append(seconds * 1000)

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures[what] += 1


class Agent:
    """One agent's operations on one started task run, each timed."""

    def __init__(self, http: httpx.Client, started: dict[str, Any], timings: Timings, timed: bool):
        self.http, self.timings, self.timed = http, timings, timed
        self.endpoints: dict[str, str] = started["endpoints"]
        self.credentials: dict[str, Any] = started["credentials"]

    def op(self, what: str, call: Callable[[], Any]) -> Any:
        begin = time.perf_counter()
        try:
            answer = call()
        except Exception as exc:  # counted, and the agent goes on as an agent would
            self.timings.fail(f"{what}: {type(exc).__name__}")
            return None
        if self.timed:
            self.timings.add("ops", time.perf_counter() - begin)
        if isinstance(answer, httpx.Response) and answer.status_code >= 400:
            self.timings.fail(f"{what}: {answer.status_code}")
        return answer

    def get(self, what: str, endpoint: str, suffix: str = "", **params: Any) -> Any:
        return self.op(what, lambda: self.http.get(self.endpoints[endpoint] + suffix, params=params or None))

    def post(self, what: str, endpoint: str, suffix: str = "", **kwargs: Any) -> Any:
        return self.op(what, lambda: self.http.post(self.endpoints[endpoint] + suffix, **kwargs))

    def work(self) -> None:
        """Twenty operations over every surface."""
        patients = self.get("fhir search Patient", "fhir", "/Patient", name="Smith")
        doctors = self.get("fhir search Practitioner", "fhir", "/Practitioner", name="Rivera")
        self.get("fhir read Patient", "fhir", "/Patient/john-smith")
        patient = _first_id(patients) or "john-smith"
        doctor = _first_id(doctors) or "unknown"
        appointment = {
            "resourceType": "Appointment",
            "status": "booked",
            "start": "2026-12-03T09:00:00Z",
            "end": "2026-12-03T09:30:00Z",
            "participant": [
                {"actor": {"reference": f"Practitioner/{doctor}"}, "status": "accepted"},
                {"actor": {"reference": f"Patient/{patient}"}, "status": "accepted"},
            ],
        }
        self.post("fhir create Appointment", "fhir", "/Appointment", json=appointment, headers=FHIR)
        self.get("fhir search Appointment", "fhir", "/Appointment", status="booked")
        self.get("fhir search Condition", "fhir", "/Condition", patient=patient)
        x12 = {"content": ELIGIBILITY_270, "headers": {"Content-Type": "application/edi-x12"}}
        self.post("x12 270", "x12", "/270", **x12)
        hl7 = self.credentials["hl7"]
        message = "\r".join(adt_a08(hl7["receiving_facility"], control=f"B{time.monotonic_ns()}"))
        self.op("hl7 mllp ADT^A08", lambda: _mllp(hl7["host"], int(hl7["port"]), message))
        outbound = {"content": message, "headers": {"Content-Type": "application/hl7-v2"}}
        self.post("hl7 http ADT^A08", "hl7_outbound", **outbound)
        self.get("hl7 inbox", "hl7_inbox")
        self.get("files listing", "files")
        self.get("files read referral", "files", "/inbox/referrals/smith-cardiology.txt")
        note = {"content": b"seen by the bench agent\n", "headers": {"Content-Type": "text/plain"}}
        self.op(
            "files write", lambda: self.http.put(self.endpoints["files"] + "/outbox/notes/bench.txt", **note)
        )
        self.op("sftp copy referral", lambda: asyncio.run(copy_referral(self.credentials["sftp"])))
        self.get("portal list prior auths", "portal", "/prior_auth_requests")
        self.post("portal request prior auth", "portal", "/prior_auth_requests", json=PRIOR_AUTH_REQUEST)
        self.get("portal list prior auths", "portal", "/prior_auth_requests")
        self.post("voice turns", "voice", "/turns", json=TURNS)
        self.get("fhir read Patient", "fhir", "/Patient/john-smith")
        self.post("x12 270", "x12", "/270", **x12)


def _first_id(answer: Any) -> str | None:
    try:
        return str(answer.json()["entry"][0]["resource"]["id"])
    except (AttributeError, LookupError, TypeError, ValueError):
        return None


def _mllp(host: str, port: int, message: str) -> bytes:
    reply = send_mllp(host, port, message, timeout=30)
    if b"MSA|AA" not in reply:
        raise RuntimeError("not accepted")
    return reply


def prepare(url: str, task_runs: int, clients: int) -> list[tuple[str, str]]:
    """(run token, task run id) for `task_runs` task runs of the bundled benchmark."""
    package = read_package(PACKAGE)
    package = replace(package, benchmark={**package.benchmark, "concurrency": clients})
    found: list[tuple[str, str]] = []
    with Assay(api_key=KEY, base_url=url, timeout=600) as client:
        report = push(client, package)
        version = client.benchmarks.publish(report.benchmark_id, force=True)
        per_run = len(package.tasks) * MAX_TRIALS
        for i in range(math.ceil(task_runs / per_run)):
            trials = min(MAX_TRIALS, math.ceil((task_runs - i * per_run) / len(package.tasks)))
            body = {
                "benchmark": f"{version.slug}@{version.version}",
                "trials": trials,
                "agent": {"name": "bench"},
            }
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as api:
                run = api.post("/v1/benchmark-runs", json=body).raise_for_status().json()
            found += [(run["bearer_token"], task_run["id"]) for task_run in run["task_runs"]]
    return found[:task_runs]


def drive(
    urls: list[str], todo: list[tuple[str, str]], clients: int, timings: Timings, *, timed: bool
) -> float:
    """Work every task run of `todo` with `clients` agents, agent i on instance `urls[i % N]`;
    the wall time in seconds."""
    work: queue.Queue[tuple[str, str]] = queue.Queue()
    for item in todo:
        work.put(item)

    def agent(url: str) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            while True:
                try:
                    token, task_run_id = work.get_nowait()
                except queue.Empty:
                    return
                http.headers["Authorization"] = f"Bearer {token}"
                one_task_run(http, task_run_id, timings, timed)

    threads = [threading.Thread(target=agent, args=(urls[i % len(urls)],)) for i in range(clients)]
    begin = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - begin


def one_task_run(http: httpx.Client, task_run_id: str, timings: Timings, timed: bool) -> None:
    while True:  # a 409 for the concurrency limit is waited out (another agent's complete frees a slot)
        begin = time.perf_counter()
        started = http.post(f"/v1/task-runs/{task_run_id}/start")
        if started.status_code != 409 or "concurrency limit" not in started.text:
            break
        timings.fail("start: 409 concurrency limit (retried)")
        time.sleep(0.01)
    if timed:
        timings.add("start", time.perf_counter() - begin)
    if started.status_code != 200:
        timings.fail(f"start: {started.status_code}")
        return
    Agent(http, started.json(), timings, timed).work()
    begin = time.perf_counter()
    completed = http.post(f"/v1/task-runs/{task_run_id}/complete")
    if timed:
        timings.add("complete", time.perf_counter() - begin)
    if completed.status_code != 200:
        timings.fail(f"complete: {completed.status_code}")


def hello(port: int, clients: int, seconds: float) -> tuple[float, float]:
    """Requests/s and p50 ms of the bare hello-world under `clients` keep-alive clients."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client() -> None:
        mine = []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            while time.perf_counter() < stop:
                begin = time.perf_counter()
                http.get("/hello").raise_for_status()
                mine.append(time.perf_counter() - begin)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(latencies) / seconds, _p(sorted(latencies), 0.5) * 1000


def _p(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task-runs", type=int, default=200, help="timed task runs")
    parser.add_argument("--warmup", type=int, default=16, help="untimed task runs first")
    parser.add_argument("--clients", type=int, default=8, help="concurrent agents")
    parser.add_argument("--workers", type=int, default=1, help="assay serve --workers")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument(
        "--instances", type=int, default=1, help="assay serve processes on one PostgreSQL (needs --postgres)"
    )
    parser.add_argument("--hello-seconds", type=float, default=5.0, help="hello-world measurement")
    args = parser.parse_args()
    if args.instances > 1 and not args.postgres:
        parser.error("--instances needs --postgres: instances share one database server")
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}; {backend}, {args.instances} instance(s) × {args.workers} worker(s), {args.clients} agents, "
        f"{args.task_runs} task runs (start, 20 operations, complete)"
    )
    timings = Timings()
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as folder, ExitStack() as stack:
        database_url = stack.enter_context(postgres()) if args.postgres else None
        env = {"ASSAY_SWEEP_INTERVAL": "5"}
        served = [
            stack.enter_context(
                assay_serve(
                    Path(folder) / "data", KEY, database_url=database_url, workers=args.workers, env=env
                )
            )
            for _ in range(args.instances)
        ]
        urls, pids = [url for url, _ in served], tuple(pid for _, pid in served)
        todo = prepare(urls[0], args.warmup + args.task_runs, args.clients)
        drive(urls, todo[: args.warmup], args.clients, Timings(), timed=False)
        hello_port, _hello_pid = stack.enter_context(hello_world())
        hello_rate, hello_p50 = hello(hello_port, args.clients, args.hello_seconds)
        cluster = postmaster(database_url) if database_url else None
        processes = {"groups": pids, "children_of": (cluster,) if cluster else ()}
        cpu_before = cpu_seconds(**processes)  # type: ignore[arg-type]
        wall = drive(urls, todo[args.warmup :], args.clients, timings, timed=True)
        cpu = cpu_seconds(**processes) - cpu_before  # type: ignore[arg-type]
    done = len(timings.complete)
    print(f"task runs/min {done / wall * 60:8.1f}   ({done} in {wall:.1f} s)")
    for kind in ("start", "ops", "complete"):
        ordered = sorted(getattr(timings, kind))
        print(f"{kind:9} p50 {_p(ordered, 0.5):8.1f} ms   p99 {_p(ordered, 0.99):8.1f} ms   ({len(ordered)})")
    where = "server + PostgreSQL" if cluster else "server"
    print(f"CPU per task run ({where}): {cpu / max(done, 1) * 1000:.1f} ms")
    print(f"hello-world: {hello_rate:.0f} req/s, p50 {hello_p50:.2f} ms ({args.clients} clients, same run)")
    if timings.failures:
        print("failed or refused requests:")
        for what, count in timings.failures.most_common():
            print(f"  {count:6}  {what}")


if __name__ == "__main__":
    main()
