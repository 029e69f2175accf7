"""An SFTP listener in a thread over a real storage, with a credentials table of the test's own.

The listener, the storage and the SSH clients are the real ones; only the service's side of
`FilesAccess` (a database row lock as the gate, the event log) is replaced by a lock, a flag and a
list, which `tests/service/test_files_*` cover with the service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import paramiko
import pytest

from assay.sandboxes.files import (
    FileEvent,
    FilesAccess,
    FileStorage,
    SftpListener,
    SurfaceClosed,
    load_host_key,
    open_storage,
)

SMALL_LIMIT = 64 * 1024
"""The per-file limit the tests run with (the default is 25 MB; what crosses it is the same)."""


@dataclass
class Run:
    """One task run's files, as the listener sees them."""

    username: str
    password: str
    access: FilesAccess
    ended: bool = False
    events: list[FileEvent] = field(default_factory=list)


class Harness:
    def __init__(self, storage: FileStorage, data_dir: Path, *, max_file_bytes: int = SMALL_LIMIT):
        self.storage = storage
        self.data_dir = data_dir
        self.max_file_bytes = max_file_bytes
        self.runs: dict[str, Run] = {}
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.listener: SftpListener | None = None
        self.transports: list[paramiko.Transport] = []

    def add_run(self, name: str) -> Run:
        password = f"pw-{name}"
        holder: dict[str, Run] = {}

        @contextlib.contextmanager
        def gate() -> Iterator[None]:
            with self.lock:
                if holder["run"].ended:
                    raise SurfaceClosed(f"task run {name} has ended")
                yield

        access = FilesAccess(
            key=name,
            files=self.storage.playground(f"pg_{name}"),
            gate=gate,
            alive=lambda: not holder["run"].ended,
            record=lambda event: holder["run"].events.append(event),
            max_file_bytes=self.max_file_bytes,
            label=name,
        )
        run = holder["run"] = Run(f"tr-{name}", password, access)
        self.runs[run.username] = run
        return run

    def authenticate(self, username: str, password: str) -> FilesAccess | None:
        run = self.runs.get(username)
        if run is None or run.ended or run.password != password:
            return None
        return run.access

    def start(self, watch_interval: float = 0.05) -> int:
        self.thread.start()
        listener = SftpListener(
            self.authenticate,
            load_host_key(self.data_dir),
            host="127.0.0.1",
            port=0,
            watch_interval=watch_interval,
        )
        self.listener = listener
        return asyncio.run_coroutine_threadsafe(listener.start(), self.loop).result(10)

    def stop(self) -> None:
        for transport in self.transports:
            transport.close()
        if self.listener is not None:
            asyncio.run_coroutine_threadsafe(self.listener.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    @property
    def port(self) -> int:
        assert self.listener is not None
        return self.listener.port

    def paramiko(self, run: Run, password: str | None = None) -> paramiko.SFTPClient:
        transport = paramiko.Transport(("127.0.0.1", self.port))
        self.transports.append(transport)
        transport.connect(username=run.username, password=password or run.password)
        return paramiko.SFTPClient.from_transport(transport)  # type: ignore[return-value]

    def sftp_batch(self, run: Run, commands: str, workdir: Path) -> subprocess.CompletedProcess[str]:
        return sftp_batch("127.0.0.1", self.port, run.username, run.password, commands, workdir)


def sftp_batch(
    host: str, port: int, username: str, password: str, commands: str, workdir: Path
) -> subprocess.CompletedProcess[str]:
    """OpenSSH's `sftp -b` as an agent's tool would call it, the password given through
    SSH_ASKPASS (no terminal needed)."""
    askpass = workdir / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\necho '{password}'\n")
    askpass.chmod(0o700)
    batch = workdir / "batch.txt"
    batch.write_text(commands)
    env = {
        "PATH": "/usr/bin:/bin",
        "SSH_ASKPASS": str(askpass),
        "SSH_ASKPASS_REQUIRE": "force",
        "DISPLAY": ":0",
        "HOME": str(workdir),
    }
    options = {
        "BatchMode": "no",  # before -b: `sftp -b` adds BatchMode=yes, and ssh keeps the first value
        "StrictHostKeyChecking": "no",
        "UserKnownHostsFile": str(workdir / "known_hosts"),
        "PreferredAuthentications": "password,keyboard-interactive",
        "PubkeyAuthentication": "no",
        "ConnectTimeout": "10",
    }
    command = ["sftp"]
    for key, value in options.items():
        command += ["-o", f"{key}={value}"]
    command += ["-b", str(batch), "-P", str(port), f"{username}@{host}"]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=workdir
    )


@pytest.fixture
def storage(tmp_path: Path) -> FileStorage:
    return open_storage(None, tmp_path / "data")


@pytest.fixture
def harness(storage: FileStorage, tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(storage, tmp_path / "data")
    harness.start()
    yield harness
    harness.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SFTP_BINARY = shutil.which("sftp")
needs_sftp = pytest.mark.skipif(
    SFTP_BINARY is None and not os.environ.get("CI"),  # CI installs it (.ci/run): there it must run
    reason="OpenSSH's sftp client is not installed (apt-get install openssh-client)",
)


def sftp_client(credentials: Mapping[str, Any]) -> paramiko.SFTPClient:
    """A paramiko SFTP session with a task run's `credentials.sftp` (`{host, port, username, password}`)."""
    transport = paramiko.Transport((credentials["host"], credentials["port"]))
    transport.connect(username=credentials["username"], password=credentials["password"])
    client = paramiko.SFTPClient.from_transport(transport)
    assert client is not None
    return client


def entries(client: Any, folder: str = "/") -> list[str]:
    return sorted(client.listdir(folder))


@dataclass(frozen=True)
class MotoS3:
    """moto's S3 server (its real HTTP API, on a free port) and the options s3fs needs for it."""

    endpoint: str

    @property
    def options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "key": "testing", "secret": "testing"}

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def new_bucket(self) -> str:
        name = f"assay-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield MotoS3(f"http://{host}:{port}")
    server.stop()


@pytest.fixture
def s3_storage(moto_s3: MotoS3, tmp_path: Path) -> FileStorage:
    return open_storage(f"s3://{moto_s3.new_bucket()}/assay", tmp_path / "data", moto_s3.options)


@dataclass
class Served:
    """`assay serve` in a process of its own (what a crash can kill), and its bootstrap key."""

    process: subprocess.Popen[bytes]
    url: str
    key: str
    log: Path

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token or self.key}"}, timeout=60
        )


@contextlib.contextmanager
def assay_serve(data_dir: Path, *options: str, database_url: str | None = None) -> Iterator[Served]:
    """`assay serve --data-dir … --sftp-port 0 --mllp-port 0 *options`, ready for requests; stopped
    with SIGINT on the way out unless the test killed it."""
    key, port = "vk_files_" + uuid.uuid4().hex, free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update(ASSAY_BOOTSTRAP_API_KEY=key, PYTHONUNBUFFERED="1")
    if database_url:
        env["ASSAY_DATABASE_URL"] = database_url
    command = [str(Path(sys.executable).parent / "assay"), "serve", "--data-dir", str(data_dir)]
    command += ["--port", str(port), "--sftp-port", "0", "--mllp-port", "0", *options]
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / f"serve-{port}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=output, env=env)
    served = Served(process, f"http://127.0.0.1:{port}", key, log)
    try:
        with served.client() as api:
            for _ in range(3000):  # workers spawn, import and migrate: a minute on a loaded machine
                try:
                    if api.get("/benchmarks").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert process.poll() is None, log.read_text()
                time.sleep(0.1)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@dataclass(frozen=True)
class GcsEmulator:
    """gcp-storage-emulator (GCS's JSON API, in a process of its own on a free port); gcsfs finds it
    through STORAGE_EMULATOR_HOST, which the fixture sets for this test process."""

    endpoint: str

    @property
    def options(self) -> dict[str, Any]:
        return {"token": "anon", "project": "assay-test"}

    def new_bucket(self) -> str:
        name = f"assay-{uuid.uuid4().hex[:12]}"
        created = httpx.post(
            f"{self.endpoint}/storage/v1/b", params={"project": "assay-test"}, json={"name": name}
        )
        assert created.status_code == 200, created.text
        return name

    def keys(self, bucket: str) -> list[str]:
        """Every object name in `bucket` (the JSON API's own listing, not gcsfs's)."""
        listed = httpx.get(f"{self.endpoint}/storage/v1/b/{bucket}/o")
        assert listed.status_code == 200, listed.text
        return sorted(item["name"] for item in listed.json().get("items", []))


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GcsEmulator]:
    binary = Path(sys.executable).parent / "gcp-storage-emulator"
    port = free_port()
    process = subprocess.Popen(
        [str(binary), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    emulator = GcsEmulator(f"http://127.0.0.1:{port}")
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = emulator.endpoint
    try:
        for _ in range(300):
            assert process.poll() is None, "gcp-storage-emulator exited at start-up"
            try:
                if httpx.get(f"{emulator.endpoint}/storage/v1/b", params={"project": "x"}).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield emulator
    finally:
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
        process.terminate()
        process.wait(10)


@pytest.fixture
def gcs_storage(gcs_emulator: GcsEmulator, tmp_path: Path) -> FileStorage:
    return open_storage(f"gs://{gcs_emulator.new_bucket()}/assay", tmp_path / "data", gcs_emulator.options)
