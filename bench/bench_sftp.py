"""SFTP benchmark: a 10 MB upload and 20 concurrent sessions, through the real service.

    uv run python bench/bench_sftp.py [--repeat 3] [--sessions 20]

The service (`create_app`, uvicorn in a thread, SQLite in a fresh data dir) runs its SFTP listener;
a benchmark with one task is started and its `credentials.sftp` used by paramiko, as an agent would.
Each upload goes through the whole path: login looked up in the database, content written aside,
staged, moved into the tree under the sandbox row's lock, the sidecar rewritten, an event recorded.

Peers (ratio = ours / peer, lower is better):
- **stock asyncssh**: asyncssh's own `SFTPServer` chrooted to a local folder, no sandbox logic —
  what our layers cost on top of the same SSH library;
- **raw s3fs put** (S3 rows): `put_file` of the same 10 MB to moto with s3fs — the storage's own cost.

S3 rows run against moto's server (its real HTTP API, in-process, on a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncssh
import httpx
import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.service.conftest import BOOTSTRAP_KEY, _serve

from assay.service.settings import Settings

MB = 1024 * 1024


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


# -- the service and its credentials -------------------------------------------------------------


@contextmanager
def service(storage_url: str | None = None, storage_options: dict[str, Any] | None = None) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as data_dir:
        settings = (
            Settings(
                data_dir=Path(data_dir),
                bootstrap_api_key=BOOTSTRAP_KEY,
            )
            .with_free_ports()
            .with_surface_settings(
                {
                    "files": {
                        "storage_url": storage_url,
                        "storage_options": json.dumps(storage_options) if storage_options else None,
                    }
                }
            )
        )
        for url, _ in _serve(settings):
            yield url


def started_runs(url: str, count: int) -> list[dict[str, Any]]:
    """`credentials.sftp` of `count` started task runs (one benchmark run each)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}, timeout=60) as api:
        benchmark = api.post("/benchmarks", json={"name": f"bench {uuid.uuid4().hex[:8]}"}).json()
        api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "upload"}).raise_for_status()
        credentials = []
        for _ in range(count):
            run = api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}).json()
            start = run["task_runs"][0]["start_url"]
            started = httpx.post(
                url + start, headers={"Authorization": f"Bearer {run['bearer_token']}"}, timeout=60
            ).json()
            credentials.append(started["credentials"]["sftp"])
        return credentials


# -- the peer: asyncssh's stock chrooted SFTP server -----------------------------------------------


class _Peer:
    """asyncssh's own `SFTPServer(chroot=...)` on a local folder, password `peer`."""

    def __init__(self, root: Path):
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    def start(self) -> dict[str, Any]:
        self.thread.start()
        root = str(self.root)

        class Login(asyncssh.SSHServer):
            def begin_auth(self, username: str) -> bool:
                return True

            def password_auth_supported(self) -> bool:
                return True

            def validate_password(self, username: str, password: str) -> bool:
                return password == "peer"

        async def listen() -> int:
            server = await asyncssh.listen(
                "127.0.0.1",
                0,
                server_factory=Login,
                server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
                sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=root),
            )
            self.server = server
            return int(server.sockets[0].getsockname()[1])

        self.port = asyncio.run_coroutine_threadsafe(listen(), self.loop).result(30)
        return {"host": "127.0.0.1", "port": self.port, "username": "peer", "password": "peer"}

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# -- the workloads ---------------------------------------------------------------------------------


def _client(credentials: dict[str, Any]) -> paramiko.SFTPClient:
    transport = paramiko.Transport((credentials["host"], credentials["port"]))
    transport.connect(username=credentials["username"], password=credentials["password"])
    client = paramiko.SFTPClient.from_transport(transport)
    assert client is not None
    return client


def upload_seconds(credentials: dict[str, Any], payload: bytes, name: str) -> float:
    """Wall time of one `put` of `payload` on an open session (login excluded)."""
    client = _client(credentials)
    try:
        started = time.perf_counter()
        client.putfo(io.BytesIO(payload), name)
        return time.perf_counter() - started
    finally:
        client.close()
        client.get_channel().get_transport().close()  # type: ignore[union-attr]


def session_seconds(credentials: dict[str, Any], payload: bytes, name: str) -> float:
    """One agent session: log in, list, upload `payload`, stat it, log out."""
    started = time.perf_counter()
    client = _client(credentials)
    client.listdir(".")
    client.putfo(io.BytesIO(payload), name)
    client.stat(name)
    client.close()
    client.get_channel().get_transport().close()  # type: ignore[union-attr]
    return time.perf_counter() - started


def concurrent(sessions: list[Callable[[], float]]) -> tuple[float, list[float]]:
    """(wall seconds, per-session seconds) of running every session at once."""
    started = time.perf_counter()
    with ThreadPoolExecutor(len(sessions)) as pool:
        each = list(pool.map(lambda run: run(), sessions))
    return time.perf_counter() - started, each


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=20)
    args = parser.parse_args()
    payload = os.urandom(10 * MB)
    small = os.urandom(100 * 1024)
    rows: list[tuple[str, float, float, str]] = []

    with tempfile.TemporaryDirectory() as peer_root:
        peer = _Peer(Path(peer_root))
        peer_credentials = peer.start()
        peer_upload = _median(
            [upload_seconds(peer_credentials, payload, f"p{i}.bin") for i in range(args.repeat)]
        )
        peer_wall, peer_each = concurrent(
            [
                (lambda i=i: session_seconds(peer_credentials, small, f"s{i}.bin"))  # type: ignore[misc]
                for i in range(args.sessions)
            ]
        )
        peer.stop()

    with service() as url:
        [credentials] = started_runs(url, 1)
        ours = _median([upload_seconds(credentials, payload, f"u{i}.bin") for i in range(args.repeat)])
        rows.append(("10 MB upload, local storage", ours, peer_upload, "stock asyncssh"))
        many = started_runs(url, args.sessions)
        wall, each = concurrent(
            [
                (lambda c=c, i=i: session_seconds(c, small, f"s{i}.bin"))  # type: ignore[misc]
                for i, c in enumerate(many)
            ]
        )
        rows.append((f"{args.sessions} concurrent sessions (wall)", wall, peer_wall, "stock asyncssh"))
        rows.append(
            (f"  one session of {args.sessions}, p50", _median(each), _median(peer_each), "stock asyncssh")
        )

    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    options = {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}
    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
        region_name="us-east-1",
    ).create_bucket(Bucket="bench")  # fmt: skip
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    with tempfile.NamedTemporaryFile() as local:
        local.write(payload)
        local.flush()
        raw = []
        for i in range(args.repeat):
            started = time.perf_counter()
            fs.put_file(local.name, f"bench/raw/{i}.bin")
            raw.append(time.perf_counter() - started)
    with service("s3://bench/assay", options) as url:
        [credentials] = started_runs(url, 1)
        ours = _median([upload_seconds(credentials, payload, f"u{i}.bin") for i in range(args.repeat)])
        rows.append(("10 MB upload, S3 (moto)", ours, _median(raw), "raw s3fs put"))
    moto.stop()

    print(f"machine: {platform.platform()}, {os.cpu_count()} cores; load average {os.getloadavg()}")
    print(f"{'measure':44} {'ours':>9} {'peer':>9} {'ratio':>7}  peer")
    for name, mine, theirs, who in rows:
        print(f"{name:44} {mine * 1000:8.0f}ms {theirs * 1000:8.0f}ms {mine / theirs:7.2f}  {who}")


if __name__ == "__main__":
    main()
