"""A full disk under `assay serve` (SQLite and the file trees in a data dir on a real, small tmpfs):
writes that need room answer 507 `INSUFFICIENT_STORAGE` (SFTP: a "no space" failure status),
never a 500; `/healthz` says the disk is full; deleting a file through the API frees its space;
once there is room again everything works without a restart, and nothing is half-written.

The disk is a real one: a tmpfs mounted for the test (`mount -t tmpfs -o size=…`), which needs
root; skipped when the test is not root or the mount is refused (no injected errors).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import paramiko
import pytest

from .builders import NOTE_WRITTEN, ok, one_patient_bundle
from .processes import start_serve, stop

SIZE_MB = 40
CHUNK = 4 * 1024 * 1024


@pytest.fixture
def small_disk() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mountpoint = Path(tempfile.mkdtemp(prefix="assay-full-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mountpoint)], capture_output=True
    )
    if mounted.returncode != 0:
        mountpoint.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


def _started(url: str, key: str) -> tuple[dict[str, str], dict]:  # type: ignore[type-arg]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        tag = uuid.uuid4().hex[:8]
        data = one_patient_bundle("Full")
        dataset = ok(api.post("/datasets", json={"name": f"ehr {tag}", "type": "fhir", "data": data}), 201)
        benchmark = ok(api.post("/benchmarks", json={"name": f"full {tag}"}), 201)
        task = ok(
            api.post(
                "/tasks", json={"benchmark_id": benchmark["id"], "name": "t", "dataset_ids": [dataset["id"]]}
            ),
            201,
        )
        ok(api.post("/criteria", json={"task_id": task["id"], "label": "n", "assertion": NOTE_WRITTEN}), 201)
        run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
        [task_run] = run["task_runs"]
        agent = {"Authorization": f"Bearer {run['bearer_token']}"}
        return agent, ok(api.post(task_run["start_url"], headers=agent))


def _path(url: str) -> str:
    return httpx.URL(url).raw_path.decode()


def test_a_full_disk_answers_507_frees_space_on_delete_and_recovers(small_disk: Path) -> None:
    key = "vk_full_" + uuid.uuid4().hex
    served = start_serve(small_disk / "data", database_url=None, key=key, workers=1)
    try:
        agent, started = _started(served.url, key)
        files = _path(started["endpoints"]["files"])
        fhir = _path(started["endpoints"]["fhir"])
        stored: dict[str, str] = {}
        with httpx.Client(base_url=served.url, headers=agent, timeout=60) as client:
            refused = None
            for index in range(SIZE_MB // 4 + 2):  # more than the disk holds
                content = os.urandom(CHUNK)
                answer = client.put(f"{files}/fill/{index}.bin", content=content)
                if answer.status_code == 201:
                    stored[f"fill/{index}.bin"] = hashlib.sha256(content).hexdigest()
                    continue
                refused = answer
                break
            assert refused is not None, "the disk never filled"
            assert refused.status_code == 507, refused.text
            assert refused.json()["error"]["code"] == "INSUFFICIENT_STORAGE"

            health = ok(client.get("/healthz"))
            assert health["status"] == "degraded" and any("disk full" in p for p in health["problems"]), (
                health
            )

            # Other writes: stored when they fit, else 507 or 503 (the event log waits): never a 500.
            note = {"resourceType": "Basic", "code": {"text": "x" * 200}}
            for _ in range(3):
                assert client.post(f"{fhir}/Basic", json=note).status_code in (201, 503, 507)

            sftp = started["credentials"]["sftp"]
            transport = paramiko.Transport(("127.0.0.1", sftp["port"]))
            try:
                transport.connect(username=sftp["username"], password=sftp["password"])
                channel = paramiko.SFTPClient.from_transport(transport)
                assert channel is not None
                with pytest.raises(IOError, match=r"(?i)space"):
                    channel.putfo(io.BytesIO(os.urandom(CHUNK)), "over-sftp.bin")
                channel.close()
            finally:
                transport.close()

            # A delete frees the space (the sidecar is not rewritten first on a full disk).
            freed = next(iter(stored))
            assert client.delete(f"{files}/{freed}").status_code == 204
            del stored[freed]
            assert ok(client.get("/healthz"))["status"] == "ok"
            content = os.urandom(CHUNK // 2)
            assert client.put(f"{files}/after.bin", content=content).status_code == 201
            stored["after.bin"] = hashlib.sha256(content).hexdigest()
            assert client.post(f"{fhir}/Basic", json=note).status_code == 201

            # Nothing half-written: the tree lists exactly what was acknowledged, byte for byte,
            # and no set-aside upload is left holding space.
            listed = {entry["path"]: entry["sha256"] for entry in ok(client.get(files))["data"]}
            assert listed == stored
            for path, digest in stored.items():
                assert hashlib.sha256(client.get(f"{files}/{path}").content).hexdigest() == digest

            def partials() -> list[Path]:
                return [p for p in (small_disk / "data").rglob("*") if p.is_file() and ".partial" in str(p)]

            # The SFTP session's end is handled by the server after the client has gone: a bounded
            # wait for it; an upload left aside for good never clears.
            deadline = time.monotonic() + 5
            while partials() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not partials(), partials()
    finally:
        stop(served, hard=True)
