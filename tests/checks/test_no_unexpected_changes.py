"""`no-unexpected-changes` offline: snapshots with a `baseline.json` → open_snapshot → verify_task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid
from assay.core.state import resource_digest
from assay.snapshot import SnapshotFile, SnapshotWriter, open_snapshot
from assay.verify import CriterionSpec, verify_task

ALICE = {"resourceType": "Patient", "id": "alice", "name": [{"family": "Adams"}], "gender": "female"}
BOB = {"resourceType": "Patient", "id": "bob", "name": [{"family": "Brown"}], "gender": "male"}
SEEDED = [ALICE, BOB]


def snapshot(
    tmp_path: Path,
    final: list[dict[str, Any]],
    *,
    baseline: bool = True,
    files: list[SnapshotFile] = (),  # type: ignore[assignment]
    seeded_files: dict[str, str] | None = None,
) -> Path:
    writer = SnapshotWriter(tmp_path / "snap")
    writer.add_fhir(final)
    for file in files:
        writer.add_file(file)
    if baseline:
        writer.add_baseline("fhir", {f"{r['resourceType']}/{r['id']}": resource_digest(r) for r in SEEDED})
    if seeded_files is not None:
        writer.add_baseline("files", seeded_files)
    return writer.close()


def verify(root: Path, **assertion: Any) -> dict[str, Any]:
    spec = CriterionSpec({"assert": "no-unexpected-changes", **assertion})
    return verify_task([spec], open_snapshot(root)).as_json()["criterion_runs"][0]


def appointment(rid: str, patient: str) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "id": rid,
        "status": "booked",
        "participant": [{"actor": {"reference": f"Patient/{patient}"}, "status": "accepted"}],
    }


def test_no_change_passes(tmp_path: Path) -> None:
    # meta is not content: a server stamping versionId/lastUpdated is no change
    final = [{**ALICE, "meta": {"versionId": "1", "lastUpdated": "2026-01-01T00:00:00Z"}}, BOB]
    run = verify(snapshot(tmp_path, final))
    assert run["passed"] is True
    assert run["evidence"]["changes"] == []


def test_wrong_patient_edit_fails_naming_the_patient(tmp_path: Path) -> None:
    final = [ALICE, {**BOB, "gender": "female"}, appointment("a1", "alice")]
    run = verify(snapshot(tmp_path, final), allow=[{"resourceType": "Appointment", "change": "created"}])
    assert run["passed"] is False and run["status"] == "ok"
    assert run["evidence"]["unexpected"] == [
        {"surface": "fhir", "key": "Patient/bob", "change": "updated", "allowed": None}
    ]
    assert "updated Patient/bob" in run["details"]


def test_allowed_create_passes_and_search_restricts_it(tmp_path: Path) -> None:
    root = snapshot(tmp_path, [ALICE, BOB, appointment("a1", "alice")])
    allow_alice = [{"resourceType": "Appointment", "search": {"patient": "Patient/alice"}}]
    assert verify(root, allow=allow_alice)["passed"] is True
    allow_bob = [{"resourceType": "Appointment", "search": {"patient": "Patient/bob"}}]
    run = verify(root, allow=allow_bob)
    assert run["passed"] is False
    assert run["evidence"]["unexpected"][0]["key"] == "Appointment/a1"


def test_duplicate_order_and_delete(tmp_path: Path) -> None:
    root = snapshot(tmp_path, [ALICE, appointment("a1", "alice"), appointment("a2", "alice")])
    run = verify(root, allow=[{"resourceType": "Appointment", "change": "created"}])
    # both creates are allowed by the entry; the deleted patient is not
    assert [c["key"] for c in run["evidence"]["unexpected"]] == ["Patient/bob"]
    assert run["evidence"]["unexpected"][0]["change"] == "deleted"
    ok = verify(
        root,
        allow=[
            {"resourceType": "Appointment", "change": "created"},
            {"resourceType": "Patient", "change": "deleted"},
        ],
    )
    assert ok["passed"] is True


def test_snapshot_without_baseline_is_an_error(tmp_path: Path) -> None:
    run = verify(snapshot(tmp_path, [ALICE, BOB], baseline=False))
    assert run["status"] == "error"
    assert "baseline" in run["details"]
    asked = verify(snapshot(tmp_path / "b", [ALICE, BOB]), surfaces=["fhir", "files"])
    assert asked["status"] == "error" and "files" in asked["details"]


def test_stray_file_fails_and_allowed_glob_passes(tmp_path: Path) -> None:
    seeded = SnapshotFile("inbound/referral.pdf", b"%PDF-1.4 seeded", seeded=True)
    stray = SnapshotFile("tmp/notes.txt", b"scratch")
    report = SnapshotFile("outbound/summary.pdf", b"%PDF-1.4 report")
    import hashlib

    baseline = {seeded.path: hashlib.sha256(seeded.content).hexdigest()}
    root = snapshot(tmp_path, SEEDED, files=[seeded, stray, report], seeded_files=baseline)
    run = verify(root, surfaces=["files"], allow=[{"path": "outbound/*.pdf"}])
    assert run["passed"] is False
    assert run["evidence"]["unexpected"] == [
        {"surface": "files", "key": "tmp/notes.txt", "change": "created", "allowed": None}
    ]
    assert verify(root, allow=[{"path": "outbound/*.pdf"}, {"path": "tmp/*"}])["passed"] is True


def test_bad_allow_entries_are_rejected() -> None:
    with pytest.raises(AssertionInvalid) as caught:
        parse_assertion({"assert": "no-unexpected-changes", "allow": [{"resourceType": "Nope"}]})
    assert any("allow.0" in key for key in caught.value.errors)
    with pytest.raises(AssertionInvalid):
        parse_assertion({"assert": "no-unexpected-changes", "surfaces": ["voice"]})
