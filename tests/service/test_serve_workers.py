"""`assay serve --workers 2` on PostgreSQL (issue 10 §6): the MLLP listener runs once, in the listener
process `serve` supervises, and a message sent to it lands in the right task run's playground.
And on Linux the workers' connections are spread over both (issue 9)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from hl7.client import MLLPClient

from assay.formats.hl7 import parse_message

from .processes import serving

ASSERTION = {
    "assert": "hl7-structural",
    "correlate_by": {"message_type": "ADT^A08"},
    "fields": [{"path": "PID.5.1", "expected": "SMITH"}],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _message(facility: str) -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|W-1|P|2.5.1\r"
        "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
    )


def test_two_workers_route_an_mllp_message_to_its_playground(_postgres_database: str, tmp_path: Path) -> None:
    key, port = "vk_workers_" + uuid.uuid4().hex, _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update(ASSAY_DATABASE_URL=_postgres_database, ASSAY_BOOTSTRAP_API_KEY=key, PYTHONUNBUFFERED="1")
    command = [str(Path(sys.executable).parent / "assay"), "serve", "--data-dir", str(tmp_path)]
    command += ["--port", str(port), "--workers", "2", "--mllp-port", "0", "--sftp-port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    api = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=60
    )
    try:
        for _ in range(3000):  # workers spawn, import and migrate: a minute on a loaded machine
            try:
                if api.get("/benchmarks").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            time.sleep(0.1)
        benchmark = api.post("/benchmarks", json={"name": "workers", "concurrency": 2}).json()
        for name in ("first", "second"):
            task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": name}).json()
            criterion = {"task_id": task["id"], "label": "sent", "assertion": ASSERTION}
            assert api.post("/criteria", json=criterion).status_code == 201
        run = api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}).json()
        agent = httpx.Client(
            base_url=api.base_url, headers={"Authorization": f"Bearer {run['bearer_token']}"}, timeout=60
        )
        api.close()
        api = agent
        started = [agent.post(tr["start_url"]).json() for tr in run["task_runs"]]
        ports = {s["credentials"]["hl7"]["port"] for s in started}
        assert len(ports) == 1 and 0 not in ports  # one listener, its bound port told to both workers
        hl7 = started[1]["credentials"]["hl7"]
        with MLLPClient("127.0.0.1", hl7["port"]) as client:
            ack = parse_message(client.send_message(_message(hl7["receiving_facility"])).decode())
        assert ack.read("MSA.1").value == "AA"
        verdicts = [agent.post(tr["complete_url"]).json()["verdict"] for tr in run["task_runs"]]
        assert verdicts == ["fail", "pass"]
    finally:
        api.close()
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def _sockets_of(pid: int) -> set[int]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(int(link[8:-1]))
    return inodes


def _tcp_on(port: int) -> list[tuple[str, int]]:
    """(state, inode) of every TCP socket whose local port is `port` (/proc/net/tcp{,6})."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.append((fields[3], int(fields[9])))
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="SO_REUSEPORT spreads connections on Linux only")
def test_connections_are_spread_over_the_workers(tmp_path: Path) -> None:
    """Each worker listens on a socket of its own (`SO_REUSEPORT`), so keep-alive connections opened
    at once land on both workers (with one shared socket, all 16 of an agent harness's went to one
    worker, the other idle); the supervisor's socket only holds the port and never listens."""
    key = "vk_spread_" + uuid.uuid4().hex
    with serving(tmp_path, database_url=None, key=key, workers=2) as served:
        group = os.getpgid(served.process.pid)

        def listening_workers() -> dict[int, set[int]]:
            listening = {inode for state, inode in _tcp_on(served.port) if state == "0A"}
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _in_group(int(p), group)]
            return {pid: _sockets_of(pid) for pid in pids if _sockets_of(pid) & listening}

        # The server answers once one worker is up; on a loaded machine the other may still be
        # starting (CI met it once): wait, bounded, for both to listen before connecting.
        for _ in range(300):
            if len(listening_workers()) >= 2:
                break
            time.sleep(0.1)
        clients = [httpx.Client(base_url=served.url, timeout=30) for _ in range(24)]
        try:
            for client in clients:
                assert client.get("/healthz").status_code == 200
            entries = _tcp_on(served.port)
            listening = {inode for state, inode in entries if state == "0A"}
            established = {inode for state, inode in entries if state == "01"}
            workers = listening_workers()
            assert len(workers) == 2, "one listening socket per worker"
            assert len(listening) == 2, "no other socket listens: the supervisor's only holds the port"
            per_worker = sorted(len(inodes & established) for inodes in workers.values())
            assert sum(per_worker) == 24 and per_worker[0] > 0, per_worker
        finally:
            for client in clients:
                client.close()


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group
    except OSError:
        return False
