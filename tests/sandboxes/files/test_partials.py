"""Uploads set aside and never moved in (a writer that died): never listed or captured, and swept
away — the SFTP listener's when the next listener starts, the others once stale."""

from __future__ import annotations

import io
import json
import signal
import tarfile
import time
from pathlib import Path

import pytest
from ulid import ULID

from assay.sandboxes.files import FileStorage, open_storage
from assay.sandboxes.files.storage import PARTIAL_GRACE_SECONDS
from tests.sandboxes.files.conftest import assay_serve, sftp_client
from tests.sandboxes.files.test_surface import _benchmark
from tests.service.builders import ok, start_run


@pytest.fixture(params=["local", "s3", "gcs"])
def any_storage(request: pytest.FixtureRequest, tmp_path: Path) -> FileStorage:
    if request.param == "local":
        return open_storage(None, tmp_path / "data")
    return request.getfixturevalue(f"{request.param}_storage")  # type: ignore[no-any-return]


def _old_ulid() -> str:
    return str(ULID.from_timestamp(time.time() - PARTIAL_GRACE_SECONDS - 60))


def _everything(storage: FileStorage) -> set[str]:
    """Every object under the root and every file in the scratch folder."""
    found = {str(key) for key in storage.fs.find(storage.root)}
    if storage.scratch.is_dir():
        found |= {str(path) for path in storage.scratch.rglob("*") if path.is_file()}
    return found


def test_a_sweep_removes_what_dead_writers_left_and_nothing_else(any_storage: FileStorage) -> None:
    files = any_storage.playground("pg_1")
    files.seed("inbox/order.txt", b"order")
    before = _everything(any_storage)
    # The SFTP listener died mid-upload: its aside file (and, on object stores, one staged object).
    cut = any_storage.aside("pg_1", listener=True)
    cut.write_bytes(b"half a referral")
    staged = None
    if not any_storage.is_local:
        uploaded = any_storage.aside("pg_1", listener=True)
        uploaded.write_bytes(b"a whole referral, never committed")
        staged = any_storage.stage(uploaded)
        assert "/.partial/sftp/pg_1." in staged.key
    # An API worker died long ago between staging and committing; another is staging right now.
    old = any_storage.stage_bytes(b"old")
    any_storage.move(old.key, old.key.rsplit("/", 1)[0] + "/" + _old_ulid())
    fresh = any_storage.stage_bytes(b"in flight")

    assert [r.path for r in files.records()] == ["inbox/order.txt"]  # set aside is never in the tree
    assert files.listing().children("") == [("inbox", "folder")]

    removed = any_storage.sweep_partials(listener_gone=True, older_than=PARTIAL_GRACE_SECONDS)
    assert len(removed) == (3 if staged else 2), removed
    assert not cut.exists()
    left = _everything(any_storage) - before
    assert left == {fresh.key}, left  # the writer still at work keeps its content
    assert files.read("inbox/order.txt") == b"order"
    assert any_storage.sweep_partials() == []  # nothing named: nothing removed


def test_an_upload_cut_by_a_crash_is_never_seen_and_is_removed_at_restart(tmp_path: Path) -> None:
    """A real crash: `assay serve` is killed (SIGKILL) while an agent is half-way through an SFTP
    put. The half-upload is not in the tree; the next `assay serve` removes it as its listener starts,
    and the task run's capture holds only what was committed."""
    data = tmp_path / "data"
    partials = data / "files" / ".partial" / "sftp"
    with assay_serve(data) as first, first.client() as api:
        run = start_run(api, _benchmark(api))
        [task_run] = run.task_runs
        with first.client(run.token) as agent:
            started = ok(agent.post(task_run["start_url"]))
            client = sftp_client(started["credentials"]["sftp"])
            client.mkdir("outbox")
            client.putfo(io.BytesIO(b"{}"), "outbox/draft.json")
            handle = client.open("outbox/referral.json", "wb")
            handle.write(b"x" * 40_000)
            handle.flush()
            [cut] = list(partials.iterdir())
            assert cut.name.startswith(f"{started['playground_id']}.") and cut.stat().st_size == 40_000
            listed = ok(agent.get(started["endpoints"]["files"]))["data"]
            assert "outbox/referral.json" not in {entry["path"] for entry in listed}
            assert sorted(client.listdir("outbox")) == ["draft.json"]
            assert ".partial" not in client.listdir("/")
            first.process.send_signal(signal.SIGKILL)
            first.process.wait(30)
            client.get_channel().get_transport().close()  # type: ignore[union-attr]
    assert cut.exists()  # what the crash left behind

    with assay_serve(data) as second, second.client() as api:
        assert not cut.exists() and list(partials.iterdir()) == []
        with second.client(run.token) as agent:
            completed = ok(agent.post(task_run["complete_url"]))
        assert completed["checks"][0]["passed"] is False  # the referral never arrived
        archive = tmp_path / "state.tar.gz"
        archive.write_bytes(api.get(f"/task-runs/{task_run['id']}/state").content)
        with tarfile.open(archive) as tar:
            names = [name for name in tar.getnames() if name.startswith("snapshot/files")]
            meta = json.loads(tar.extractfile("snapshot/files.meta.json").read())  # type: ignore[union-attr]
    assert sorted(meta) == ["inbox/order.txt", "inbox/request.json", "outbox/draft.json"]
    assert not [name for name in names if ".partial" in name or name.endswith("referral.json")]
