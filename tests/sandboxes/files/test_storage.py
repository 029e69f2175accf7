"""Storage through fsspec: the local default, S3 against moto's server, GCS against
gcp-storage-emulator, and refusals at start-up."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import fsspec
import pytest

from assay.sandboxes.files import (
    AlreadyExists,
    FileMissing,
    FileStorage,
    FolderNotEmpty,
    IsAFolder,
    NotAFolder,
    StorageError,
    open_storage,
    storage_settings,
)
from tests.sandboxes.files.conftest import Harness, MotoS3


def test_the_default_is_a_folder_in_the_data_dir(tmp_path: Path) -> None:
    storage = open_storage(None, tmp_path)
    assert storage.is_local and storage.url == (tmp_path / "files").resolve().as_uri()
    files = storage.playground("pg_1")
    files.seed("inbox/a.txt", b"hello")
    assert (tmp_path / "files" / "pg_1" / "files" / "inbox" / "a.txt").read_bytes() == b"hello"
    sidecar = json.loads((tmp_path / "files" / "pg_1" / "files.meta.json").read_text())
    assert sidecar["inbox/a.txt"]["sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert sidecar["inbox/a.txt"]["seeded"] is True


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/x", "must be s3://bucket/prefix, gs://bucket/prefix or file:///path"),
        ("s3://", "must be s3://"),
        ("s3:///prefix", "names no bucket"),
        ("bucket/prefix", "must be s3://"),
    ],
)
def test_a_bad_url_fails_at_start_up_by_name(url: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=message):
        open_storage(url, tmp_path)


def test_a_missing_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(protocol: str) -> None:
        raise ImportError(f"Install gcsfs to access {protocol}")

    monkeypatch.setattr(fsspec, "get_filesystem_class", unavailable)
    with pytest.raises(StorageError, match=r"needs the gcsfs package.*assay\[gcs\]"):
        open_storage("gs://bucket/prefix", tmp_path)


def test_an_unusable_bucket_fails_at_start_up(moto_s3: MotoS3, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"storage s3://no-such-bucket/x is not usable"):
        open_storage("s3://no-such-bucket/x", tmp_path, moto_s3.options)


def test_storage_options_must_be_a_json_object() -> None:
    assert storage_settings(
        {"ASSAY_STORAGE_URL": "s3://b/p", "ASSAY_STORAGE_OPTIONS": '{"anon": false}'}
    ) == (
        "s3://b/p",
        {"anon": False},
    )
    with pytest.raises(StorageError, match="not JSON"):
        storage_settings({"ASSAY_STORAGE_OPTIONS": "{"})
    with pytest.raises(StorageError, match="JSON object"):
        storage_settings({"ASSAY_STORAGE_OPTIONS": "[]"})


@pytest.fixture(params=["local", "s3", "gcs"])
def any_storage(request: pytest.FixtureRequest, tmp_path: Path) -> FileStorage:
    if request.param == "local":
        return open_storage(None, tmp_path / "data")
    return request.getfixturevalue(f"{request.param}_storage")  # type: ignore[no-any-return]


def test_tree_operations_on_each_backend(any_storage: FileStorage) -> None:
    files = any_storage.playground("pg_1")
    files.seed("inbox/order.hl7", b"MSH|...")
    files.mkdir("outbox")
    files.commit(any_storage.stage_bytes(b'{"a": 1}'), "outbox/x.json", metadata={"source": "agent"})
    listing = files.listing()
    assert listing.children("") == [("inbox", "folder"), ("outbox", "folder")]
    assert listing.kind("outbox/x.json") == "file"
    with pytest.raises(AlreadyExists):
        files.mkdir("outbox")
    with pytest.raises(NotAFolder):
        files.commit(any_storage.stage_bytes(b"x"), "outbox/x.json/y")
    with pytest.raises(IsAFolder):
        files.commit(any_storage.stage_bytes(b"x"), "outbox")
    with pytest.raises(FolderNotEmpty):
        files.rmdir("outbox")
    files.rename("outbox", "sent")
    assert files.read("sent/x.json") == b'{"a": 1}'
    with pytest.raises(FileMissing):
        files.read("outbox/x.json")
    records = {r.path: r for r in files.records()}
    assert set(records) == {"inbox/order.hl7", "sent/x.json"}
    assert records["sent/x.json"].metadata == {"source": "agent"} and not records["sent/x.json"].seeded
    assert (
        records["inbox/order.hl7"].seeded
        and records["inbox/order.hl7"].content_type == "x-application/hl7-v2+er7"
    )
    files.delete("sent/x.json")
    files.rmdir("sent")
    assert [r.path for r in files.records()] == ["inbox/order.hl7"]


def test_sftp_over_s3_writes_the_tree_into_the_bucket(
    moto_s3: MotoS3, s3_storage: FileStorage, tmp_path: Path
) -> None:
    harness = Harness(s3_storage, tmp_path / "data")
    harness.start()
    try:
        run = harness.add_run("a")
        client = harness.paramiko(run)
        client.mkdir("outbox")
        client.putfo(io.BytesIO(b"referral"), "outbox/referral.txt")
        assert client.listdir("outbox") == ["referral.txt"]
        client.close()
    finally:
        harness.stop()
    bucket, prefix = s3_storage.root.split("/", 1)
    s3 = moto_s3.client()
    body = s3.get_object(Bucket=bucket, Key=f"{prefix}/pg_a/files/outbox/referral.txt")["Body"].read()
    assert body == b"referral"
    sidecar = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}/pg_a/files.meta.json")["Body"].read())
    assert sidecar["outbox/referral.txt"]["sha256"] == hashlib.sha256(b"referral").hexdigest()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert not [key for key in keys if "/.partial/" in key]
    assert not [p for p in (tmp_path / "data" / "tmp" / "files").rglob("*") if p.is_file()]
