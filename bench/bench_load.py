"""Load benchmark: the agent path under 16 concurrent clients vs a bare FastAPI hello-world.

    uv run python bench/bench_load.py [--seconds 10] [--clients 16] [--postgres]

The hello-world is a bare FastAPI app on stock `uvicorn.run` (uvloop and httptools, as uvicorn
picks them); the agent path is `assay serve` (one worker; two with `--postgres`). Until session
10 the hello-world ran through `assay.service.server.run` too; since that writes each response in
one socket write (`_OneWritePerResponse`), which a bare uvicorn does not, it no longer stands for
"bare". Both are driven by the same load generator: `--clients` keep-alive HTTP/1.1 connections
from one asyncio process, each sending its next request as soon as the last answer is read (a
minimal client, so the generator costs little of the 2 cores it shares with the server). All servers are up at once and take
turns: the measured seconds of each are `--rounds` slices, hello-world, SQLite, PostgreSQL,
hello-world, … — on this shared machine the speed of the same code moves by a third within
minutes, and measured one after the other the ratio compared one phase with another (measured:
hello-world 9,236 and 6,396 req/s in two runs ten minutes apart, the agent path the same).

- hello-world: `GET /hello` → `{"hello": "world"}` from a bare FastAPI app;
- the agent path: run-token FHIR searches on the 16 Synthea patients of `tests/fixtures`
  (`Patient?family=…`, `Condition?patient=…`, `Encounter?patient=…&_count=10`), each through
  `/v1/task-runs/{id}/fhir/…` (token resolved, task run checked, event logged);
- while that load runs, one more client completes other started task runs one after the other
  and reports `complete`'s latency.

Prints requests/s, p50/p99 latency and errors for each, the agent/hello ratio and the machine's
load average, and the servers' CPU per request over the measured seconds (user + system, from
`/proc`: the `assay serve` process group — workers, listener process — and, on PostgreSQL, the
cluster's processes too; the completes of that window are in it): on this shared machine it
moves far less with the load than requests/s do. Targets on the 2-core machine: ratio ≥ 0.40, p99 < 50 ms, 0
errors, `complete` p50 < 50 ms under load. `--postgres`: the agent path on PostgreSQL with 2 workers
(`ASSAY_BENCH_POSTGRES_URL`, else a throwaway cluster, as `bench_complete.py` does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
from _serve import assay_serve, free_port
from bench_complete import KEY, postgres

ROOT = Path(__file__).resolve().parents[1]
SYNTHEA = ROOT / "tests" / "fixtures" / "fhir" / "synthea"
HELLO = """
import sys
import uvicorn
from fastapi import FastAPI
app = FastAPI()
@app.get("/hello")
async def hello() -> dict[str, str]:
    return {"hello": "world"}
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
"""A bare FastAPI app on stock uvicorn (which picks uvloop and httptools, both installed), as the
issue names the baseline; `assay serve`'s own protocol (`assay.service.server`) is not its."""


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    """Non-2xx statuses and transport errors, by kind."""
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """Seconds of CPU the server's parts used over the measured seconds, when they are known."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    @property
    def cpu_per_request_ms(self) -> dict[str, float]:
        count = len(self.latencies)
        return {part: seconds / count * 1000 for part, seconds in self.cpu.items()} if count else {}

    def merge(self, other: Result) -> None:
        self.latencies += other.latencies
        self.errors += other.errors
        self.failures += other.failures
        self.seconds += other.seconds
        for part, seconds in other.cpu.items():
            self.cpu[part] = self.cpu.get(part, 0.0) + seconds

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")


async def _one_client(
    port: int, requests: list[bytes], offset: int, until: float, result: Result, record_after: float
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = offset
    try:
        while (now := time.perf_counter()) < until:
            writer.write(requests[i % len(requests)])
            i += 1
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                status = int(head[9:12])
            except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
                result.errors += 1
                result.failures[type(exc).__name__] += 1
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            if now >= record_after:
                result.latencies.append(time.perf_counter() - now)
                if status >= 400:
                    result.errors += 1
                    result.failures[str(status)] += 1
    finally:
        writer.close()


def drive(
    port: int,
    requests: list[bytes],
    clients: int,
    seconds: float,
    warmup: float = 2.0,
    cpu: Callable[[], dict[str, float]] | None = None,
) -> Result:
    """`clients` connections sending `requests` round-robin for `warmup` + `seconds` seconds;
    `cpu()` (the server's CPU seconds so far) is read when the measured seconds begin and end."""
    result = Result(seconds=seconds)
    marks: list[dict[str, float]] = []

    async def main() -> None:
        start = time.perf_counter()
        until = start + warmup + seconds
        if cpu is not None:
            asyncio.get_running_loop().call_later(warmup, lambda: marks.append(cpu()))
        await asyncio.gather(
            *(_one_client(port, requests, i, until, result, start + warmup) for i in range(clients))
        )
        if cpu is not None and marks:
            result.cpu = {part: seconds - marks[0][part] for part, seconds in cpu().items()}

    asyncio.run(main())
    return result


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(
    *, pids: tuple[int, ...] = (), groups: tuple[int, ...] = (), children_of: tuple[int, ...] = ()
) -> float:
    """User + system CPU seconds of the processes `pids`, of every process in `groups` and of
    every child of `children_of`, alive or reaped by it (PostgreSQL's backends come and go)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(entry) in pids or int(fields[2]) in groups or int(fields[1]) in children_of:
            total += int(fields[11]) + int(fields[12])
        if int(entry) in children_of:
            total += int(fields[13]) + int(fields[14])
    return total / _TICK


def postmaster(database_url: str) -> int | None:
    """The postmaster of a local PostgreSQL cluster (each of its processes is a child of it, in a
    session of its own), found as a backend's parent; None when it is not on this machine."""
    try:
        with psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert backend is not None
        stat = Path(f"/proc/{backend[0]}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, psycopg.Error, AssertionError):
        return None


def server_cpu(group: int, cluster: int | None) -> Callable[[], dict[str, float]]:
    """CPU seconds so far of an `assay serve` process group and, when its database is PostgreSQL,
    of the cluster's processes (`postmaster`), by part."""

    def cpu() -> dict[str, float]:
        parts = {"assay": cpu_seconds(groups=(group,))}
        if cluster is not None:
            parts["postgres"] = cpu_seconds(pids=(cluster,), children_of=(cluster,))
        return parts

    return cpu


def _get(path: str, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Accept: application/fhir+json\r\n\r\n".encode()


@contextmanager
def hello_world() -> Iterator[tuple[int, int]]:
    """(port, pid) of the bare FastAPI app."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", HELLO, str(port)])
    try:
        for _ in range(600):
            try:
                httpx.get(f"http://127.0.0.1:{port}/hello")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def _patients() -> list[tuple[str, str]]:
    """(id, family name) of every Synthea patient in the fixtures."""
    found = []
    for path in sorted(SYNTHEA.glob("*/*.json")):
        for entry in json.loads(path.read_text()).get("entry", []):
            resource = entry.get("resource", {})
            if resource.get("resourceType") == "Patient":
                found.append((resource["id"], resource["name"][0]["family"]))
    return found


def prepare(url: str, runs: int) -> list[tuple[str, str]]:
    """A benchmark over all Synthea files; `runs` runs created and started: (token, task run id)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=300) as api:
        ids = []
        for path in sorted(SYNTHEA.glob("*/*.json")):
            body = {
                "name": f"{path.stem} {uuid.uuid4().hex[:6]}",
                "type": "fhir",
                "data": json.loads(path.read_text()),
            }
            created = api.post("/datasets", json=body)
            created.raise_for_status()
            ids.append(created.json()["id"])
        environment = api.post(
            "/environments", json={"name": f"synthea {uuid.uuid4().hex[:6]}", "dataset_ids": ids}
        )
        environment.raise_for_status()
        benchmark = api.post(
            "/benchmarks",
            json={
                "name": f"load {uuid.uuid4().hex[:6]}",
                "environment_id": environment.json()["id"],
                "concurrency": 1,
            },
        ).json()
        task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "search"}).json()
        criterion = {
            "task_id": task["id"],
            "label": "a patient is there",
            "assertion": {
                "assert": "fhir-resource-state",
                "resource_type": "Patient",
                "search": {"_id": _patients()[0][0]},
            },
        }
        api.post("/criteria", json=criterion).raise_for_status()
        started = []
        for _ in range(runs):
            created = api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}).json()
            token, task_run_id = created["bearer_token"], created["task_runs"][0]["id"]
            reply = api.post(
                f"/v1/task-runs/{task_run_id}/start", headers={"Authorization": f"Bearer {token}"}
            )
            reply.raise_for_status()
            started.append((token, task_run_id))
    return started


def agent_requests(task_run_id: str, token: str) -> list[bytes]:
    base = f"/v1/task-runs/{task_run_id}/fhir"
    requests = []
    for patient_id, family in _patients():
        requests.append(_get(f"{base}/Patient?family={quote(family)}", token))
        requests.append(_get(f"{base}/Condition?patient=Patient/{patient_id}", token))
        requests.append(_get(f"{base}/Encounter?patient=Patient/{patient_id}&_count=10", token))
    return requests


def completes_during(url: str, runs: Iterator[tuple[str, str]], stop: threading.Event) -> list[float]:
    """Complete the next of `runs` one after the other until `stop` (or none is left); each
    call's latency in seconds."""
    latencies = []
    with httpx.Client(base_url=url, timeout=60) as client:
        while not stop.is_set():
            found = next(runs, None)
            if found is None:
                break
            token, task_run_id = found
            begin = time.perf_counter()
            reply = client.post(
                f"/v1/task-runs/{task_run_id}/complete", headers={"Authorization": f"Bearer {token}"}
            )
            latencies.append(time.perf_counter() - begin)
            reply.raise_for_status()
            stop.wait(0.25)
    return latencies


@contextmanager
def serve(data_dir: Path, *, database_url: str | None = None, workers: int = 1) -> Iterator[tuple[str, int]]:
    """(URL, process group) of `assay serve`, as `bench_complete` runs it."""
    env = {"ASSAY_SWEEP_INTERVAL": "5"}
    with assay_serve(data_dir, KEY, database_url=database_url, workers=workers, env=env) as (url, pid):
        yield url, pid  # a session of its own: its workers and listener process are in its group


@dataclass
class Target:
    """One server under load: what its clients send, and for the agent path the started task runs
    its completer takes one after the other, and its `complete` latencies."""

    name: str
    port: int
    requests: list[bytes]
    cpu: Callable[[], dict[str, float]]
    url: str | None = None
    to_complete: Iterator[tuple[str, str]] = field(default_factory=lambda: iter(()))
    result: Result = field(default_factory=Result)
    completes: list[float] = field(default_factory=list)

    def slice(self, args: argparse.Namespace) -> None:
        """One turn: `--seconds / --rounds` measured seconds (after a short warm-up), completes
        running meanwhile; added to what the earlier turns measured."""
        stop = threading.Event()
        completer = None
        if self.url is not None:
            url = self.url
            completer = threading.Thread(
                target=lambda: self.completes.extend(completes_during(url, self.to_complete, stop))
            )
            completer.start()
        part = drive(self.port, self.requests, args.clients, args.seconds / args.rounds, 0.3, self.cpu)
        stop.set()
        if completer is not None:
            completer.join()
        self.result.merge(part)
        time.sleep(0.5)  # what it left queued (the event log) is written before the next turn


def agent_target(
    name: str, url: str, args: argparse.Namespace, cpu: Callable[[], dict[str, float]]
) -> Target:
    started = prepare(url, 1 + args.completes)
    (token, task_run_id), to_complete = started[0], started[1:]
    port = int(url.rsplit(":", 1)[1])
    requests = agent_requests(task_run_id, token)
    drive(port, requests, args.clients, 1.0, warmup=0.5)  # warm the caches
    return Target(name, port, requests, cpu, url, iter(to_complete))


def _line(name: str, result: Result) -> str:
    failures = f"  {dict(result.failures)}" if result.failures else ""
    return (
        f"{name:44} {result.rate:9.0f} {result.pct(0.5):8.1f} {result.pct(0.99):8.1f} {result.errors:7d}"
        + failures
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per server")
    parser.add_argument("--clients", type=int, default=16, help="concurrent keep-alive connections")
    parser.add_argument("--completes", type=int, default=40, help="task runs completed during the load")
    parser.add_argument(
        "--postgres", action="store_true", help="also the agent path on PostgreSQL, 2 workers"
    )
    parser.add_argument("--rounds", type=int, default=4, help="turns each server's measured seconds take")
    args = parser.parse_args()
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}; {args.clients} clients, {args.seconds:.0f} s each"
    )
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as folder, ExitStack() as running:
        port, pid = running.enter_context(hello_world())
        drive(port, [_get("/hello")], args.clients, 1.0, warmup=0.5)
        hello = Target("hello-world", port, [_get("/hello")], lambda: {"": cpu_seconds(pids=(pid,))})
        targets = [hello]
        url, group = running.enter_context(serve(Path(folder) / "sqlite"))
        targets.append(
            agent_target(
                "agent path, SQLite (embedded, 1 worker)",
                url,
                args,
                lambda: {"": cpu_seconds(groups=(group,))},
            )
        )
        if args.postgres:
            database_url = running.enter_context(postgres())
            pg_url, pg_group = running.enter_context(
                serve(Path(folder) / "pg", database_url=database_url, workers=2)
            )
            cpu = server_cpu(pg_group, postmaster(database_url))
            targets.append(agent_target("agent path, PostgreSQL (2 workers)", pg_url, args, cpu))
        for _ in range(args.rounds):
            for target in targets:
                target.slice(args)
    rows = {target.name: (target.result, target.completes) for target in targets[1:]}
    hello_result = hello.result
    print(f"{'server':44} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    print(_line("hello-world FastAPI (1 worker)", hello_result))
    for name, (result, completes) in rows.items():
        print(_line(name, result))
        print(
            f"{'':44} ratio to hello-world {result.rate / hello_result.rate:.2f}; "
            f"complete under load: p50 {statistics.median(completes) * 1000:.1f} ms over {len(completes)}"
            if completes
            else f"{'':44} ratio to hello-world {result.rate / hello_result.rate:.2f}"
        )
    per_hello = sum(hello_result.cpu_per_request_ms.values())
    for name, result in [("hello-world", hello_result), *((name, row[0]) for name, row in rows.items())]:
        parts = result.cpu_per_request_ms
        if not parts:
            continue
        per = sum(parts.values())
        split = " + ".join(f"{part} {ms:.3f}" for part, ms in parts.items()) if len(parts) > 1 else ""
        versus = f"{per / per_hello:.1f}x hello-world's" if per_hello and result is not hello_result else ""
        notes = "; ".join(note for note in (split, versus) if note)
        print(f"server CPU per request, {name}: {per:.3f} ms" + (f" ({notes})" if notes else ""))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
