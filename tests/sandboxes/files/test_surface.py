"""The files sandbox end to end: a scripted agent over SFTP (paramiko, OpenSSH's sftp), `complete`,
the evidence, rescore, the state tar.gz and `assay verify` — on local storage, on moto's S3 and on
gcp-storage-emulator's GCS."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import paramiko
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.sandboxes.files import StorageError
from assay.service.app import create_app
from assay.service.settings import Settings
from tests.sandboxes.files.conftest import GcsEmulator, MotoS3, needs_sftp, sftp_batch, sftp_client
from tests.service.builders import criterion, make_dataset, ok, start_run, unique
from tests.service.conftest import BOOTSTRAP_KEY, Server, _serve

REFERRAL = {"patient": {"member_id": "M123", "name": "Ann Lee"}, "specialty": "cardiology"}

UPLOADED = {
    "assert": "sftp-file-present",
    "path": "outbox/referral.json",
    "parse_json": True,
    "fields": [
        {"path": "patient.member_id", "expected": "M123"},
        {"key": "content_type", "expected": "application/json"},
    ],
}
ORDER_SEEN = {"assert": "sftp-file-present", "path": "inbox/order.txt", "include_seeded": True}

Json = dict[str, Any]


def _benchmark(api: httpx.Client, tasks: int = 1) -> str:
    """A benchmark of `tasks` identical referral tasks (their runs may be started side by side)."""
    dataset = make_dataset(api, "files", {"files": [{"path": "inbox/order.txt", "content": "order 42\n"}]})
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [dataset["id"]]}), 201
    )
    benchmark = ok(
        api.post(
            "/benchmarks",
            json={"name": unique("referral"), "environment_id": environment["id"], "concurrency": tasks},
        ),
        201,
    )
    for n in range(tasks):
        task = ok(
            api.post(
                "/tasks",
                json={
                    "benchmark_id": benchmark["id"],
                    "name": f"send the referral {n}",
                    "scenario": [
                        {
                            "step": "drop_file_inbox",
                            "path": "inbox/request.json",
                            "content": json.dumps(REFERRAL),
                        }
                    ],
                },
            ),
            201,
        )
        for body in (
            criterion(UPLOADED, label="referral uploaded"),
            criterion(ORDER_SEEN, label="order seeded"),
        ):
            ok(api.post("/criteria", json={"task_id": task["id"], **body}), 201)
    return str(benchmark["id"])


def _run(server: Server, api: httpx.Client, upload_to: str) -> tuple[Json, Json, Json]:
    """Start, let a scripted agent read its inbox and upload the referral, complete."""
    run = start_run(api, _benchmark(api))
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        started = ok(agent.post(task_run["start_url"]))
        sftp = started["credentials"]["sftp"]
        assert sftp["port"] > 0 and sftp["username"].startswith("tr-")
        client = sftp_client(sftp)
        assert sorted(client.listdir("inbox")) == ["order.txt", "request.json"]
        request = json.loads(client.open("inbox/request.json").read())
        client.mkdir("outbox")
        client.putfo(io.BytesIO(json.dumps(request).encode()), upload_to)
        listed = ok(agent.get(f"{started['endpoints']['files']}"))["data"]
        assert {entry["path"]: entry["seeded"] for entry in listed} == {
            "inbox/order.txt": True,
            "inbox/request.json": True,
            upload_to: False,
        }
        got = agent.get(f"{started['endpoints']['files']}/{upload_to}")
        assert got.status_code == 200 and json.loads(got.content) == REFERRAL, got.text
        completed = ok(agent.post(task_run["complete_url"]))
        transport = client.get_channel().get_transport()  # type: ignore[union-attr]
        for _ in range(300):
            if not transport.is_active():
                break
            time.sleep(0.02)
        assert not transport.is_active(), "the SFTP session outlived its task run"
        with pytest.raises(paramiko.AuthenticationException):
            sftp_client(sftp)
        late = agent.put(f"{started['endpoints']['files']}/outbox/late.txt", content=b"late")
        assert late.status_code == 409, late.text
    return started, completed, task_run


def _agree(api: httpx.Client, task_run_id: str, completed: Json, tmp_path: Path) -> None:
    """`rescore`, the state tar.gz and `assay verify` say what `complete` said."""
    rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
    assert (rescored["score"], rescored["verdict"]) == (completed["score"], completed["verdict"])
    state = api.get(f"/task-runs/{task_run_id}/state")
    assert state.status_code == 200
    archive = tmp_path / "state.tar.gz"
    archive.write_bytes(state.content)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        meta = json.loads(tar.extractfile("snapshot/files.meta.json").read())  # type: ignore[union-attr]
    assert "snapshot/files/inbox/order.txt" in names
    assert meta["inbox/order.txt"]["seeded"] is True and len(meta["inbox/order.txt"]["sha256"]) == 64
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps({"criteria": [{"assertion": UPLOADED}, {"assertion": ORDER_SEEN}]}))
    result = CliRunner().invoke(cli, ["verify", str(task_file), str(archive), "--json"])
    assert result.exit_code == 0, result.output
    verified = json.loads(result.stdout)
    assert (verified["score"], verified["verdict"]) == (completed["score"], completed["verdict"])
    assert [c["evidence"] for c in verified["criterion_runs"]] == [c["evidence"] for c in completed["checks"]]


def test_an_agent_uploads_the_referral_and_passes(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    _, completed, task_run = _run(server, api, "outbox/referral.json")
    assert completed["verdict"] == "pass" and completed["score"] == 1, completed
    uploaded = completed["checks"][0]
    assert uploaded["evidence"]["matchedPaths"] == ["outbox/referral.json"]
    assert [f["actual"] for f in uploaded["evidence"]["fieldResults"]] == ["M123", "application/json"]
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    uploads = [e for e in events if e["type"] == "file_upload"]
    assert [(e["method"], e["path"], e["status"]) for e in uploads] == [("SFTP", "/outbox/referral.json", 0)]
    assert len(uploads[0]["request"]["sha256"]) == 64
    _agree(api, task_run["id"], completed, tmp_path)


def test_a_wrong_upload_path_fails_naming_the_path(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    _, completed, task_run = _run(server, api, "outbox/referal.json")
    assert completed["verdict"] != "pass"
    uploaded = completed["checks"][0]
    assert uploaded["passed"] is False and uploaded["score"] == 0
    assert "outbox/referral.json" in uploaded["details"]
    assert uploaded["evidence"]["matchedPaths"] == []
    _agree(api, task_run["id"], completed, tmp_path)


@needs_sftp
def test_an_agent_using_openssh_sftp_passes(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    run = start_run(api, _benchmark(api))
    [task_run] = run.task_runs
    work = tmp_path / "agent"
    work.mkdir()
    (work / "referral.json").write_text(json.dumps(REFERRAL))
    with server.client(run.token) as agent:
        sftp = ok(agent.post(task_run["start_url"]))["credentials"]["sftp"]
        result = sftp_batch(
            sftp["host"], sftp["port"], sftp["username"], sftp["password"],
            "ls inbox\nmkdir outbox\nput referral.json outbox/referral.json\n", work,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "request.json" in result.stdout
        completed = ok(agent.post(task_run["complete_url"]))
    assert completed["verdict"] == "pass", completed


def _object_storage_server(
    tmp_path_factory: pytest.TempPathFactory, kind: str, storage_url: str, options: dict[str, Any]
) -> Iterator[Server]:
    """A server whose files surface stores in `storage_url` (fsspec `options`), backend `sqlite+<kind>`."""
    settings = (
        Settings(
            data_dir=tmp_path_factory.mktemp(f"assay-{kind}"),
            bootstrap_api_key=BOOTSTRAP_KEY,
            sweep_interval=0.2,
        )
        .with_free_ports()
        .with_surface_settings(
            {"files": {"storage_url": storage_url, "storage_options": json.dumps(options)}}
        )
    )
    for url, app in _serve(settings):
        server = Server(url, app.state.database, BOOTSTRAP_KEY, f"sqlite+{kind}")
        server.app_settings = settings  # type: ignore[attr-defined]
        yield server


@pytest.fixture(scope="module")
def s3_server(moto_s3: MotoS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _object_storage_server(
        tmp_path_factory, "s3", f"s3://{moto_s3.new_bucket()}/deployment", moto_s3.options
    )


def test_the_same_flow_on_s3(s3_server: Server, moto_s3: MotoS3, tmp_path: Path) -> None:
    with s3_server.client() as api:
        started, completed, task_run = _run(s3_server, api, "outbox/referral.json")
        assert completed["verdict"] == "pass", completed
        _agree(api, task_run["id"], completed, tmp_path)
    s3 = moto_s3.client()
    keys = [
        obj["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=_bucket_of(s3_server))
        for obj in page.get("Contents", [])
    ]
    playground = started["playground_id"]
    assert f"deployment/{playground}/files/outbox/referral.json" in keys
    assert f"deployment/{playground}/files.meta.json" in keys
    assert not [key for key in keys if "/.partial/" in key]


@pytest.fixture(scope="module")
def gcs_server(gcs_emulator: GcsEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _object_storage_server(
        tmp_path_factory, "gcs", f"gs://{gcs_emulator.new_bucket()}/deployment", gcs_emulator.options
    )


def test_the_same_flow_on_gcs(gcs_server: Server, gcs_emulator: GcsEmulator, tmp_path: Path) -> None:
    """gs:// storage (gcsfs) against a GCS API server: seed, SFTP upload, files API, complete → pass."""
    with gcs_server.client() as api:
        started, completed, task_run = _run(gcs_server, api, "outbox/referral.json")
        assert completed["verdict"] == "pass", completed
        _agree(api, task_run["id"], completed, tmp_path)
    settings: Settings = gcs_server.app_settings  # type: ignore[attr-defined]
    storage_url = settings.surface_options["files"]["storage_url"]
    bucket = storage_url.removeprefix("gs://").split("/", 1)[0]
    keys = gcs_emulator.keys(bucket)
    playground = started["playground_id"]
    assert f"deployment/{playground}/files/outbox/referral.json" in keys
    assert f"deployment/{playground}/files/inbox/order.txt" in keys
    assert f"deployment/{playground}/files.meta.json" in keys
    assert not [key for key in keys if "/.partial/" in key]


def _bucket_of(server: Server) -> str:
    settings: Settings = server.app_settings
    storage_url: str = settings.surface_options["files"]["storage_url"]
    return storage_url.removeprefix("s3://").split("/", 1)[0]


def test_a_bad_storage_url_stops_the_start_up(tmp_path: Path) -> None:
    for url, message in (
        ("ftp://host/x", "must be s3://bucket/prefix"),
        ("s3:///x", "names no bucket"),
    ):
        app = create_app(
            Settings(data_dir=tmp_path)
            .with_free_ports()
            .with_surface_settings({"files": {"storage_url": url}})
        )
        with pytest.raises(StorageError, match=message), TestClient(app):
            pass


def test_uploads_racing_complete_land_whole_or_not_at_all(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    run = start_run(api, _benchmark(api))
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        sftp = ok(agent.post(task_run["start_url"]))["credentials"]["sftp"]
        client = sftp_client(sftp)
        client.mkdir("outbox")
        accepted: list[str] = []
        payload = b"x" * 50_000

        def upload() -> None:
            for i in range(200):
                name = f"outbox/{i:03d}.bin"
                try:
                    client.putfo(io.BytesIO(payload), name)
                except (OSError, EOFError, paramiko.SSHException):
                    return
                accepted.append(name)

        uploader = threading.Thread(target=upload)
        uploader.start()
        for _ in range(200):
            if len(accepted) >= 3:
                break
            time.sleep(0.01)
        ok(agent.post(task_run["complete_url"]))
        uploader.join(60)
    state = api.get(f"/task-runs/{task_run['id']}/state")
    archive = tmp_path / "state.tar.gz"
    archive.write_bytes(state.content)
    with tarfile.open(archive) as tar:
        captured = {
            name.removeprefix("snapshot/files/"): tar.extractfile(name).read()  # type: ignore[union-attr]
            for name in tar.getnames()
            if name.startswith("snapshot/files/outbox/")
        }
        meta = json.loads(tar.extractfile("snapshot/files.meta.json").read())  # type: ignore[union-attr]
    assert set(accepted) <= set(captured), "an upload the agent saw succeed is missing from the capture"
    assert all(content == payload for content in captured.values()), "a captured upload is half-written"
    assert {path for path in meta if path.startswith("outbox/")} == set(captured)
    again = ok(api.post(f"/task-runs/{task_run['id']}/rescore"))
    assert (again["verdict"], again["score"]) == ("partial", 0.5)  # only the seeded order is there


def test_a_100_mb_upload_is_refused_at_the_limit_and_the_session_carries_on(
    server: Server, api: httpx.Client
) -> None:
    """The default limit (25 MB) against an agent writing a 100 MB scan: the write that crosses it
    fails with an SFTP status naming the limit, nothing of it reaches the tree, and the same
    session then uploads the referral and passes."""
    run = start_run(api, _benchmark(api))
    [task_run] = run.task_runs
    megabyte = 1024 * 1024
    with server.client(run.token) as agent:
        started = ok(agent.post(task_run["start_url"]))
        client = sftp_client(started["credentials"]["sftp"])
        client.mkdir("outbox")
        handle = client.open("outbox/scan.bin", "wb")
        sent = 0
        with pytest.raises(OSError, match="26214400-byte limit for one file"):
            while sent < 100 * megabyte:
                handle.write(b"z" * megabyte)
                sent += megabyte
        assert 24 * megabyte <= sent < 26 * megabyte, sent  # refused where it crossed, not at the end
        with contextlib.suppress(OSError):
            handle.close()
        assert "scan.bin" not in client.listdir("outbox")
        client.putfo(io.BytesIO(json.dumps(REFERRAL).encode()), "outbox/referral.json")
        listed = ok(agent.get(started["endpoints"]["files"]))["data"]
        assert sorted(entry["path"] for entry in listed) == [
            "inbox/order.txt",
            "inbox/request.json",
            "outbox/referral.json",
        ]
        completed = ok(agent.post(task_run["complete_url"]))
    assert completed["verdict"] == "pass", completed
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    uploads = [(e["path"], e["status"]) for e in events if e["type"] == "file_upload"]
    assert sorted(uploads) == [("/outbox/referral.json", 0), ("/outbox/scan.bin", 4)], uploads
