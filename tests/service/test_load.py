"""Issue 9's reproduction, bounded: many concurrent requests to a real `assay serve` process.

Before, about 41 concurrent requests froze the default SQLite server for good (the session
dependency held the write lock across thread hand-offs until all 40 worker threads waited for it),
and PostgreSQL with one worker answered 500 once its connection pool ran dry. Here every request
must be answered (a 503 only with `Retry-After`), the server must answer normally afterwards, and
SIGTERM must stop it. The bounds are there so a regression fails instead of hanging the suite;
nothing is timed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from assay.store.database import FairLock

from .conftest import BOOTSTRAP_KEY

CONCURRENT = 100
"""More than AnyIO's 40 worker threads (the SQLite freeze) and than PostgreSQL's pool of 10 + 20."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assay() -> list[str]:
    found = shutil.which("assay", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-c", "from assay.clients.cli import main; main()"]


@contextmanager
def _serving(
    data_dir: Path, database_url: str | None, workers: int
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    env = {**os.environ, "ASSAY_BOOTSTRAP_API_KEY": BOOTSTRAP_KEY, "ASSAY_SWEEP_INTERVAL": "0.2"}
    env.update(
        {"ASSAY_SFTP_PORT": "0", "ASSAY_MLLP_PORT": "0"}
    )  # listeners on free ports: tests run in parallel
    env.pop("ASSAY_DATABASE_URL", None)
    if database_url:
        env["ASSAY_DATABASE_URL"] = database_url
    command = [
        *_assay(),
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    log = (data_dir.parent / f"serve-{port}.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # start-up: at most ~60 s
            if process.poll() is not None:
                raise RuntimeError(f"assay serve exited with {process.returncode}")
            try:
                if httpx.get(f"{url}/benchmarks", timeout=2).status_code == 401:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise RuntimeError("assay serve did not start")
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        log.close()


async def _burst(url: str, n: int) -> list[httpx.Response | BaseException]:
    """`n` requests at once: a third unauthenticated, a third authenticated reads, a third writes."""
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
    auth = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        def one(i: int) -> asyncio.Future[httpx.Response]:
            if i % 3 == 0:
                return asyncio.ensure_future(client.get("/benchmarks"))
            if i % 3 == 1:
                return asyncio.ensure_future(client.get("/benchmarks", headers=auth))
            return asyncio.ensure_future(
                client.post("/environments", headers=auth, json={"name": f"load {i}"})
            )

        return await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)


def _check_burst(url: str) -> None:
    answers = asyncio.run(_burst(url, CONCURRENT))
    failures = [answer for answer in answers if not isinstance(answer, httpx.Response)]
    assert not failures, f"{len(failures)} of {CONCURRENT} requests got no answer: {failures[:3]!r}"
    statuses = sorted(answer.status_code for answer in answers if isinstance(answer, httpx.Response))
    for answer in answers:
        assert isinstance(answer, httpx.Response)
        assert answer.status_code in (200, 201, 401, 503), answer.text
        if answer.status_code == 503:
            assert answer.headers.get("retry-after"), answer.text
    assert statuses.count(401) == len(range(0, CONCURRENT, 3)), statuses


def _check_still_answers_and_stops(url: str, process: subprocess.Popen[bytes]) -> None:
    auth = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
    assert httpx.get(f"{url}/benchmarks", headers=auth, timeout=30).status_code == 200
    created = httpx.post(f"{url}/environments", headers=auth, json={"name": "after the burst"}, timeout=30)
    assert created.status_code == 201, created.text
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)  # a bound, so a server that ignores SIGTERM fails the test


@pytest.mark.parametrize("workers", [1, 2])
def test_sqlite_answers_every_concurrent_request(tmp_path: Path, workers: int) -> None:
    with _serving(tmp_path / "data", None, workers) as (url, process):
        _check_burst(url)
        _check_burst(url)
        _check_still_answers_and_stops(url, process)


@pytest.mark.postgres
@pytest.mark.parametrize("workers", [1, 2])
def test_postgres_answers_every_concurrent_request(
    tmp_path: Path, workers: int, _postgres_database: str
) -> None:
    with _serving(tmp_path / "data", _postgres_database, workers) as (url, process):
        _check_burst(url)
        _check_burst(url)
        _check_still_answers_and_stops(url, process)


def test_fair_lock_serves_waiters_in_arrival_order() -> None:
    """The sweeper (or a `complete`) queued for the SQLite write lock is not overtaken by threads
    that arrive after it, however busy the server is."""
    import threading

    lock = FairLock()
    assert lock.acquire(1)
    order: list[int] = []
    arrived = threading.Semaphore(0)
    threads = []
    for i in range(5):

        def wait(i: int = i) -> None:
            arrived.release()
            assert lock.acquire(30)
            order.append(i)
            lock.release()

        thread = threading.Thread(target=wait)
        thread.start()
        arrived.acquire()
        while len(lock._waiters) < i + 1:  # bounded by the thread reaching its wait
            time.sleep(0.001)
        threads.append(thread)
    assert not FairLock.acquire(lock, 0.01)  # a newcomer times out instead of jumping the queue
    lock.release()
    for thread in threads:
        thread.join(timeout=30)
    assert order == [0, 1, 2, 3, 4]
