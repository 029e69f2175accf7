"""A frozen worker of `assay serve --workers 2` (SIGSTOP) is killed and replaced within
`ASSAY_WORKER_TIMEOUT` seconds: the requests that landed on it get an answer or a closed
connection within that bound (not after the old 60 s check), and afterwards every new connection
is served. Bounded waits only; nothing is timed beyond the bound under test (with slack for a
loaded machine)."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from .processes import start_serve, stop

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; one socket per worker on Linux")

WORKER_TIMEOUT = 3
SLACK = 15.0
"""Seconds beyond the bound a loaded CI machine may need (the supervisor's turn, the kill, the reset)."""


def _listening_pids(port: int) -> set[int]:
    """The processes with a socket listening on `port` (the workers; the supervisor only holds the
    port with a bound socket that does not listen)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                    inodes.add(fields[9])
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        found.add(int(pid))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait(check: object, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.1)


def test_a_frozen_worker_is_replaced_and_holds_no_request_past_the_bound(tmp_path: Path) -> None:
    key = "vk_frozen_" + uuid.uuid4().hex
    served = start_serve(
        tmp_path / "data",
        database_url=None,
        key=key,
        workers=2,
        env={"ASSAY_WORKER_TIMEOUT": str(WORKER_TIMEOUT)},
    )
    victim = None
    try:
        _wait(lambda: len(_listening_pids(served.port)) == 2, "two workers listening", 180)
        victim = min(_listening_pids(served.port))

        def fresh_connection(_: int) -> tuple[str, float]:
            began = time.monotonic()
            try:
                answer = httpx.get(f"{served.url}/healthz", timeout=120, headers={"Connection": "close"})
                outcome = str(answer.status_code)
            except httpx.TransportError as exc:
                outcome = type(exc).__name__
            return outcome, time.monotonic() - began

        os.kill(victim, signal.SIGSTOP)
        frozen_at = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(fresh_connection, range(16)))
        bound = WORKER_TIMEOUT + SLACK
        # Some new connections landed on the frozen worker's socket: each was answered by the
        # survivor, or closed when the frozen one was killed, within the bound.
        assert max(took for _, took in outcomes) < bound, outcomes
        assert {outcome for outcome, _ in outcomes} <= {
            "200",
            "RemoteProtocolError",
            "ReadError",
            "ConnectError",
        }
        _wait(
            lambda: not _alive(victim), "the frozen worker killed", bound - (time.monotonic() - frozen_at) + 1
        )
        _wait(
            lambda: len(_listening_pids(served.port) - {victim}) == 2, "a replacement worker listening", 180
        )
        answers = [fresh_connection(i)[0] for i in range(16)]
        assert answers == ["200"] * 16, answers
    finally:
        if victim is not None:
            with suppress(ProcessLookupError):
                os.kill(victim, signal.SIGCONT)
        stop(served, hard=True)
