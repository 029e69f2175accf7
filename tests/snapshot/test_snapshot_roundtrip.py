"""The SPEC §6 snapshot layout: writer → reader (directory and tar.gz), and hostile input."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from assay.core.errors import SnapshotError
from assay.core.state import Hl7Record, PortalRow, SandboxState, VoiceTurn, X12Record
from assay.snapshot import SnapshotFile, archive_snapshot, open_snapshot, write_snapshot
from assay.snapshot._tree import DirTree
from assay.snapshot.reader import SnapshotState

ADT = "MSH|^~\\&|A|B|C|D|20260101||ADT^A04|1|P|2.5\rPID|1||42\r"


def _full_snapshot(root: Path) -> Path:
    return write_snapshot(
        root,
        manifest={
            "task_run_id": "tr_1",
            "input_entity": {"member_id": "M1"},
            "entities": {"ent_1": {"k": 1}},
        },
        fhir=[{"resourceType": "Patient", "id": "p1", "name": [{"family": "Smith"}]}],
        hl7=[Hl7Record(1, ADT, "evt_1", "2026-01-01T00:00:00.000Z"), ADT],
        x12=[X12Record(1, "ISA*...~", "ISA*req~", "x12_1", "2026-01-01T00:00:00.000Z")],
        portal=[
            PortalRow(0, "prior_auth_requests", {"request_id": "R1"}),
            PortalRow(1, "prior_auth_requests", {"request_id": "R2"}, portal="acme"),
        ],
        files=[
            SnapshotFile("b/later.json", b'{"a": 1}', uploaded_at="2026-01-02T00:00:00.000Z"),
            SnapshotFile("/a/seed.csv", b"x,y\n", uploaded_at="2026-01-01T00:00:00.000Z", seeded=True),
        ],
        voice=[VoiceTurn("agent", "hello", 0, 10), VoiceTurn("caller", "hi")],
    )


def test_the_archive_has_one_header_per_member_but_files_keep_their_mtime(tmp_path: Path) -> None:
    """A fractional mtime needs a PAX header, a second header per member that reading parses in
    Python (half of `assay verify`'s archive time at 137k resources, issue 9): only `files/`
    members, whose mtime is the fallback `uploaded_at`, keep one."""
    root = _full_snapshot(tmp_path / "snap")
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (1_700_000_000.25, 1_700_000_000.25))
    with tarfile.open(fileobj=io.BytesIO(archive_snapshot(root))) as archive:
        members = archive.getmembers()
    fractional = {m.name for m in members if m.pax_headers}
    assert fractional and all(name.startswith("snapshot/files/") for name in fractional)
    assert {m.mtime for m in members if m.name.startswith("snapshot/fhir/")} == {1_700_000_000}
    assert {m.mtime for m in members if m.name.startswith("snapshot/files/")} == {1_700_000_000.25}


@pytest.mark.parametrize("as_archive", [False, True])
def test_every_store_reads_back(tmp_path: Path, as_archive: bool) -> None:
    root = _full_snapshot(tmp_path / "snap")
    target: Path = root
    if as_archive:
        target = tmp_path / "state.tar.gz"
        target.write_bytes(archive_snapshot(root))
    state = open_snapshot(target)
    assert isinstance(state, SandboxState)
    assert state.input_entity() == {"member_id": "M1"}
    assert state.entity("ent_1") == {"k": 1} and state.entity("ent_2") is None
    assert [r["id"] for r in state.fhir_search("Patient", {})] == ["p1"]
    assert [(r.seq, r.event_id) for r in state.hl7_outbound()] == [(1, "evt_1"), (2, None)]
    assert state.hl7_outbound()[1].message == ADT
    (record,) = state.x12_records()
    assert (record.request, record.record_id) == ("ISA*req~", "x12_1")
    assert [r.row["request_id"] for r in state.portal_rows("prior_auth_requests")] == ["R1", "R2"]
    assert [r.row["request_id"] for r in state.portal_rows("prior_auth_requests", "acme")] == ["R2"]
    files = state.files()
    assert [f.path for f in files] == ["a/seed.csv", "b/later.json"]  # recency: uploaded_at, then path
    assert files[0].seeded and not files[1].seeded
    assert files[1].sha256 == hashlib.sha256(b'{"a": 1}').hexdigest()
    assert files[1].content_type == "application/json"
    assert state.read_file("/b/later.json") == b'{"a": 1}'
    assert [t.text for t in state.voice_turns()] == ["hello", "hi"]


def test_missing_subfolders_are_empty_stores(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    state = open_snapshot(tmp_path / "empty")
    assert state.hl7_outbound() == [] and state.files() == [] and state.voice_turns() == []
    assert state.fhir_search("Patient", {}) == [] and state.input_entity() is None


def test_broken_records_are_skipped_with_a_warning(tmp_path: Path) -> None:
    root = _full_snapshot(tmp_path / "snap")
    (root / "fhir" / "Patient" / "bad.json").write_text("{nope")
    (root / "fhir" / "Patient" / "x.json").write_text(json.dumps({"id": "x"}))
    (root / "fhir" / "Patient" / "n.json").write_text(json.dumps({"resourceType": "Patient", "id": 5}))
    (root / "voice" / "turns.json").write_text("[")
    state = open_snapshot(root)
    assert [r["id"] for r in state.fhir_search("Patient", {})] == ["p1"]
    assert any("n.json" in w and "id" in w for w in state.warnings)
    assert state.voice_turns() == []
    assert any("bad.json" in w for w in state.warnings)
    assert any("no resourceType" in w for w in state.warnings)
    assert any("turns.json" in w for w in state.warnings)


def test_files_without_meta_get_computed_metadata(tmp_path: Path) -> None:
    (tmp_path / "s" / "files" / "in").mkdir(parents=True)
    (tmp_path / "s" / "files" / "in" / "r.hl7").write_bytes(b"MSH|")
    (record,) = open_snapshot(tmp_path / "s").files()
    assert (record.path, record.size, record.seeded) == ("in/r.hl7", 4, False)
    assert record.content_type == "x-application/hl7-v2+er7"
    assert record.uploaded_at and record.uploaded_at.endswith("Z")


def _archive(members: dict[str, bytes], kind: bytes = tarfile.REGTYPE) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname, info.size = "/etc/passwd", 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("members", "kind", "message"),
    [
        ({"snapshot/../../evil.json": b"{}"}, tarfile.REGTYPE, "unsafe path"),
        ({"/etc/evil.json": b"{}"}, tarfile.REGTYPE, "unsafe path"),
        ({"snapshot/files/link": b""}, tarfile.SYMTYPE, "not a regular file"),
    ],
)
def test_hostile_archives_are_refused(tmp_path: Path, members, kind, message: str) -> None:
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(_archive(members, kind))
    with pytest.raises(SnapshotError, match=message):
        open_snapshot(archive)


def test_writer_refuses_paths_that_leave_the_snapshot(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="unsafe path"):
        write_snapshot(tmp_path / "s", files=[SnapshotFile("../outside.txt", b"x")])
    assert not (tmp_path / "outside.txt").exists()


def test_a_turn_without_text_keeps_its_place_in_the_transcript(tmp_path: Path) -> None:
    """`turn` indexes the whole transcript (SPEC §3.6): a broken turn reads as empty, never
    shifts the turns after it."""
    (tmp_path / "s" / "voice").mkdir(parents=True)
    turns = [{"speaker": "caller", "text": "hi"}, {"speaker": "agent", "text": None}, "junk"]
    turns += [{"speaker": None, "text": "ok"}, {"speaker": "agent", "text": "your copay is $25"}]
    (tmp_path / "s" / "voice" / "turns.json").write_text(json.dumps(turns))
    state = open_snapshot(tmp_path / "s")
    assert [(t.speaker, t.text) for t in state.voice_turns()] == [
        ("caller", "hi"),
        ("agent", ""),
        ("", ""),
        ("", "ok"),
        ("agent", "your copay is $25"),
    ]
    assert sum("has no text" in w for w in state.warnings) == 2


def test_files_are_in_upload_order_as_instants_then_by_path(tmp_path: Path) -> None:
    """Recency order (SPEC §2) compares `uploaded_at` as instants, not as text: an offset or a
    fractional second must not reorder uploads."""
    root = tmp_path / "s"
    (root / "files").mkdir(parents=True)
    meta = {
        "a.json": {"uploaded_at": "2025-01-01T10:00:00.500Z"},  # 3rd
        "b.json": {"uploaded_at": "2025-01-01T11:30:00+02:00"},  # 1st: 09:30 UTC
        "c.json": {"uploaded_at": "2025-01-01T10:00:00Z"},  # 2nd: before a.json by half a second
        "d.json": {"uploaded_at": "2025-01-01T10:00:00.500Z"},  # tie with a.json: by path
    }
    for name in meta:
        (root / "files" / name).write_text("{}")
    (root / "files.meta.json").write_text(json.dumps(meta))
    assert [f.path for f in open_snapshot(root).files()] == ["b.json", "c.json", "a.json", "d.json"]


def test_bad_sidecar_values_fall_back_to_computed_metadata(tmp_path: Path) -> None:
    """A broken `files.meta.json` entry is a warning, never a crash of the check reading it."""
    root = tmp_path / "s"
    (root / "files").mkdir(parents=True)
    (root / "files" / "a.json").write_text("{}")
    (root / "files" / "b.json").write_text("[]")
    meta = {
        "a.json": {"size": None, "uploaded_at": 5, "content_type": 7, "metadata": []},
        "b.json": {"size": "big", "sha256": None, "seeded": "no"},
    }
    (root / "files.meta.json").write_text(json.dumps(meta))
    state = open_snapshot(root)
    a, b = sorted(state.files(), key=lambda f: f.path)
    assert (a.size, a.content_type, a.metadata) == (2, "application/json", {})
    assert a.uploaded_at and a.uploaded_at.endswith("Z")  # the file's time, not 5
    assert (b.size, b.sha256, b.seeded) == (2, hashlib.sha256(b"[]").hexdigest(), False)
    assert sum("files.meta.json" in w for w in state.warnings) >= 2


def test_files_listed_with_size_and_sha256_are_not_read_at_open(tmp_path: Path) -> None:
    """Listing files reads a file's bytes only for what the sidecar lacks (SPEC §6)."""
    root = tmp_path / "s"
    (root / "files").mkdir(parents=True)
    (root / "files" / "big.bin").write_bytes(b"0123456789")
    (root / "files" / "plain.txt").write_bytes(b"abc")
    meta = {"big.bin": {"size": 10, "sha256": "f" * 64}}
    (root / "files.meta.json").write_text(json.dumps(meta))

    reads: list[str] = []

    class CountingTree(DirTree):
        def read(self, path: str) -> bytes:
            reads.append(path)
            return super().read(path)

    tree = CountingTree(root)
    big, plain = sorted(SnapshotState(tree).files(), key=lambda f: f.path)
    assert (big.size, big.sha256) == (10, "f" * 64)
    assert (plain.size, plain.sha256) == (3, hashlib.sha256(b"abc").hexdigest())
    assert "files/big.bin" not in reads
    assert "files/plain.txt" in reads


def test_phone_line_turns_keep_their_source_call_and_kind(tmp_path: Path) -> None:
    turns = [
        VoiceTurn("ivr", "Press 1.", 0, 700, "line", "call_1"),
        VoiceTurn("agent", "1", 900, 1100, "line", "call_1", "dtmf"),
        VoiceTurn("agent", "Hello", 0, 350, "reported"),
        VoiceTurn("caller", "old turn"),
    ]
    assert list(open_snapshot(write_snapshot(tmp_path / "s", voice=turns)).voice_turns()) == turns
