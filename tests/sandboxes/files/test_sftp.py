"""The SFTP server through real clients: paramiko, and OpenSSH's `sftp -b` as an agent's tool calls it."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
from pathlib import Path

import paramiko
import pytest

from assay.sandboxes.files import load_host_key
from tests.sandboxes.files.conftest import SMALL_LIMIT, Harness, entries, needs_sftp

REFERRAL = json.dumps({"patient": {"member_id": "M123"}, "reason": "cardiology"}).encode()


def _wait_until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_put_get_list_and_stat_keep_the_sidecar(harness: Harness) -> None:
    run = harness.add_run("a")
    client = harness.paramiko(run)
    client.mkdir("outbox")
    client.putfo(io.BytesIO(REFERRAL), "/outbox/referral.json")
    assert entries(client) == ["outbox"]
    assert entries(client, "outbox") == ["referral.json"]
    assert client.stat("outbox/referral.json").st_size == len(REFERRAL)
    assert client.normalize("outbox/../outbox/./referral.json") == "/outbox/referral.json"
    out = io.BytesIO()
    client.getfo("outbox/referral.json", out)
    assert out.getvalue() == REFERRAL
    client.close()

    (record,) = run.access.files.records()
    assert record.path == "outbox/referral.json"
    assert record.sha256 == hashlib.sha256(REFERRAL).hexdigest()
    assert (record.size, record.content_type, record.seeded) == (len(REFERRAL), "application/json", False)
    assert [e.type for e in run.events] == ["file_upload", "file_download"]
    assert run.events[0].request["sha256"] == record.sha256 and run.events[0].status == 0


def test_rename_remove_and_folders(harness: Harness) -> None:
    run = harness.add_run("a")
    client = harness.paramiko(run)
    client.mkdir("inbox")
    client.putfo(io.BytesIO(b"x"), "inbox/a.tmp")
    client.rename("inbox/a.tmp", "inbox/a.json")
    assert entries(client, "inbox") == ["a.json"]
    assert run.access.files.records()[0].content_type == "application/json"
    with pytest.raises(OSError):
        client.rmdir("inbox")  # not empty
    client.putfo(io.BytesIO(b"y"), "inbox/b.txt")
    with pytest.raises(OSError):
        client.rename("inbox/b.txt", "inbox/a.json")  # SFTP v3 rename never overwrites
    client.posix_rename("inbox/b.txt", "inbox/a.json")
    assert entries(client, "inbox") == ["a.json"]
    client.remove("inbox/a.json")
    client.rmdir("inbox")
    assert entries(client) == []
    with pytest.raises(FileNotFoundError):
        client.remove("inbox/a.json")
    client.close()
    kinds = [e.type for e in run.events]
    assert kinds.count("file_rename") == 3 and kinds.count("file_delete") == 2


def test_a_put_into_a_missing_folder_fails_like_a_real_server(harness: Harness) -> None:
    run = harness.add_run("a")
    client = harness.paramiko(run)
    with pytest.raises(FileNotFoundError):
        client.putfo(io.BytesIO(b"x"), "nowhere/a.txt")
    assert run.access.files.records() == []


def test_escapes_and_links_are_refused_and_the_listener_carries_on(harness: Harness, tmp_path: Path) -> None:
    run = harness.add_run("a")
    client = harness.paramiko(run)
    for path in ("../escape.txt", "/../../escape.txt", "a/../../escape.txt"):
        with pytest.raises(PermissionError):
            client.putfo(io.BytesIO(b"x"), path)
    with pytest.raises(PermissionError):
        client.listdir("/..")
    with pytest.raises(PermissionError):
        client.symlink("/etc/passwd", "passwd")
    with pytest.raises(FileNotFoundError):
        client.stat("/etc/passwd")  # an absolute path is inside the chroot, where there is none
    assert not list(tmp_path.rglob("escape.txt"))
    client.putfo(io.BytesIO(b"still here"), "ok.txt")
    assert [r.path for r in run.access.files.records()] == ["ok.txt"]
    client.close()


def test_wrong_password_is_refused_and_the_listener_carries_on(harness: Harness) -> None:
    run = harness.add_run("a")
    with pytest.raises(paramiko.AuthenticationException):
        harness.paramiko(run, password="wrong")
    other = harness.add_run("b")
    with pytest.raises(paramiko.AuthenticationException):
        harness.paramiko(run, password=other.password)
    harness.paramiko(run).close()


def test_an_upload_over_the_limit_fails_and_leaves_nothing(harness: Harness, storage) -> None:  # type: ignore[no-untyped-def]
    run = harness.add_run("a")
    client = harness.paramiko(run)
    with pytest.raises(OSError):  # paramiko pipelines `putfo` and ignores close errors: its stat fails
        client.putfo(io.BytesIO(b"z" * (SMALL_LIMIT + 1)), "big.bin")
    handle = client.open("big.bin", "wb")
    with pytest.raises(OSError, match="limit for one file"):
        handle.write(b"z" * (SMALL_LIMIT + 1))
    handle.close()
    client.putfo(io.BytesIO(b"z" * SMALL_LIMIT), "exact.bin")
    assert [r.path for r in run.access.files.records()] == ["exact.bin"]
    assert not _files_in(Path(storage.key(".partial")))
    assert [(e.type, e.status) for e in run.events] == [("file_upload", 4)] * 2 + [("file_upload", 0)]
    client.close()


def test_an_abandoned_upload_leaves_nothing(harness: Harness, storage) -> None:  # type: ignore[no-untyped-def]
    run = harness.add_run("a")
    client = harness.paramiko(run)
    handle = client.open("half.bin", "wb")
    handle.write(b"half" * 1000)
    handle.flush()
    client.get_channel().get_transport().close()  # type: ignore[union-attr]
    check = harness.paramiko(run)
    _wait_until(lambda: not _files_in(Path(storage.key(".partial"))), "the aside file to go")
    assert entries(check) == [] and run.access.files.records() == []
    check.close()


def test_an_upload_racing_the_end_of_the_run_is_refused_whole(harness: Harness, storage) -> None:  # type: ignore[no-untyped-def]
    run = harness.add_run("a")
    client = harness.paramiko(run)
    handle = client.open("late.txt", "wb")
    handle.write(b"late")
    run.ended = True  # complete captured and tore down between the open and the close
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        handle.close()  # paramiko drops errors on close, or the watcher closed the session first
    assert run.access.files.records() == []
    # Refused at the close (status 4), or dropped whole when the watcher closed the session first.
    assert [(e.type, e.status) for e in run.events] in ([("file_upload", 4)], [])
    _wait_until(lambda: not _files_in(Path(storage.key(".partial"))), "the aside file to go")


def test_sessions_are_closed_when_the_run_ends_and_its_password_stops_working(harness: Harness) -> None:
    run = harness.add_run("a")
    other = harness.add_run("b")
    client = harness.paramiko(run)
    bystander = harness.paramiko(other)
    run.ended = True
    transport = client.get_channel().get_transport()  # type: ignore[union-attr]
    _wait_until(lambda: not transport.is_active(), "the session to be closed")
    with pytest.raises(paramiko.AuthenticationException):
        harness.paramiko(run)
    assert entries(bystander) == []
    bystander.close()


def test_each_run_sees_only_its_own_tree(harness: Harness) -> None:
    a, b = harness.add_run("a"), harness.add_run("b")
    client_a, client_b = harness.paramiko(a), harness.paramiko(b)
    client_a.putfo(io.BytesIO(b"secret"), "a.txt")
    assert entries(client_b) == []
    with pytest.raises(FileNotFoundError):
        client_b.stat("a.txt")
    client_a.close()
    client_b.close()


def test_the_host_key_is_kept_across_restarts(harness: Harness, tmp_path: Path) -> None:
    run = harness.add_run("a")
    client = harness.paramiko(run)
    seen = client.get_channel().get_transport().get_remote_server_key().get_fingerprint()  # type: ignore[union-attr]
    client.close()
    again = load_host_key(tmp_path / "data")
    assert again.get_fingerprint("md5").removeprefix("MD5:").replace(":", "") == seen.hex()
    assert oct((tmp_path / "data" / "sftp_host_key").stat().st_mode & 0o777) == "0o600"


@needs_sftp
def test_openssh_sftp_batch_mode(harness: Harness, tmp_path: Path) -> None:
    run = harness.add_run("a")
    work = tmp_path / "agent"
    work.mkdir()
    (work / "referral.json").write_bytes(REFERRAL)
    result = harness.sftp_batch(
        run,
        "mkdir outbox\ncd outbox\nput referral.json\nls -l\nrename referral.json r.json\nget r.json back.json\n",
        work,
    )
    assert result.returncode == 0, result.stderr
    assert "referral.json" in result.stdout
    assert (work / "back.json").read_bytes() == REFERRAL
    assert [r.path for r in run.access.files.records()] == ["outbox/r.json"]

    refused = harness.sftp_batch(run, "symlink /etc/passwd passwd\n", work)
    assert refused.returncode != 0 and "ermission denied" in refused.stderr
    refused = harness.sftp_batch(run, "put referral.json ../../escape.json\n", work)
    assert refused.returncode != 0
    assert [r.path for r in run.access.files.records()] == ["outbox/r.json"]


def _files_in(folder: Path) -> list[Path]:
    """The files set aside under `folder` (its subfolders stay: the SFTP listener's is one)."""
    return [path for path in folder.rglob("*") if path.is_file()]
