"""Real `assay serve` processes for the tests that need more than the in-thread server: several
instances on one database (scale-out), many concurrent clients (load), `kill -9` (faults).

Each process gets its own data dir, free ports for the API and the listeners, and a log file next
to the data dir (printed when it fails to start). Every wait is bounded, so a server that never
comes up fails the test instead of hanging the suite; nothing is timed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["Served", "assay_command", "free_port", "serving", "start_serve", "stop"]

START_WAIT = 180.0
"""Seconds a process may take to answer `/healthz` (spawned workers import and migrate on a loaded
machine)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assay_command() -> list[str]:
    found = shutil.which("assay", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-c", "from assay.clients.cli import main; main()"]


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    port: int

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def start_serve(
    data_dir: Path,
    *,
    database_url: str | None,
    key: str,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> Served:
    """Start `assay serve` and wait (bounded) until `/healthz` answers 200."""
    port = port or free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    environ.update(
        ASSAY_BOOTSTRAP_API_KEY=key,
        ASSAY_SWEEP_INTERVAL="0.2",
        ASSAY_SFTP_PORT="0",  # listeners on free ports: tests run in parallel
        ASSAY_MLLP_PORT="0",
        PYTHONUNBUFFERED="1",
    )
    if database_url:
        environ["ASSAY_DATABASE_URL"] = database_url
    environ.update(env or {})
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [*assay_command(), "serve", "--data-dir", str(data_dir), "--port", str(port)]
    command += ["--workers", str(workers)]
    log = data_dir.parent / f"serve-{data_dir.name}-{port}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    served = Served(f"http://127.0.0.1:{port}", process, log, port)
    deadline = time.monotonic() + START_WAIT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"assay serve exited with {process.returncode}:\n{served.output()}")
        try:
            if httpx.get(f"{served.url}/healthz", timeout=5).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop(served, hard=True)
            raise RuntimeError(f"assay serve did not answer /healthz:\n{served.output()}")
        time.sleep(0.1)


def stop(served: Served, *, hard: bool = False) -> int | None:
    """SIGTERM (or SIGKILL, the whole process group: workers and the listener process too) and
    wait, bounded; the exit code."""
    process = served.process
    if process.poll() is None:
        try:
            if hard:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    if hard:  # the group's children (workers, listener process) go with it
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode


@contextmanager
def serving(
    data_dir: Path,
    *,
    database_url: str | None,
    key: str,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[Served]:
    """`start_serve` for the span of a `with`; killed (process group) at the end if still running."""
    served = start_serve(data_dir, database_url=database_url, key=key, workers=workers, env=env)
    try:
        yield served
    finally:
        stop(served, hard=True)
