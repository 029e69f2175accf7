"""`assay serve` as deployed, for the benchmarks that measure it from outside.

Its own process (the client must not share the server's GIL) on a free port, its MLLP and SFTP
listeners on free ports too (another server on this machine may hold 2575 and 2222), with the
caller's `ASSAY_*` environment dropped so a shell's `ASSAY_DATABASE_URL` never redirects a run,
in its own process group (`serve` stops its workers and listener process itself:
`service/orphans.py`), and waited for until `/healthz` answers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ASSAY = str(Path(sys.executable).parent / "assay")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def assay_serve(
    data_dir: Path,
    key: str,
    *,
    database_url: str | None = None,
    workers: int = 1,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    timeout: float = 120.0,
) -> Iterator[tuple[str, int]]:
    """(base URL, pid) of a running `assay serve` bootstrapped with the org key `key`; its output
    goes to `log` (default: discarded) and its last lines into the error when it does not come up."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ASSAY_")}
    environment.update(ASSAY_BOOTSTRAP_API_KEY=key, ASSAY_MLLP_PORT="0", ASSAY_SFTP_PORT="0", **(env or {}))
    if database_url:
        environment["ASSAY_DATABASE_URL"] = database_url
    command = [ASSAY, "serve", "--data-dir", str(data_dir), "--port", str(port), "--workers", str(workers)]
    handle = None if log is None else log.open("wb")
    process = subprocess.Popen(
        command,
        env=environment,
        stdout=subprocess.DEVNULL if handle is None else handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:] if log is not None else "(no log kept)"
                raise RuntimeError(f"assay serve did not come up (exit {process.poll()}): {tail}")
            time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)
        if handle is not None:
            handle.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
