"""`no-unexpected-changes` offline: snapshots with a `baseline.json` → open_snapshot → verify_task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid
from assay.core.state import PortalRow, portal_digests, resource_digest
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


def _adt(control: str, mrn: str, trigger: str = "A08") -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|HOSP|20260301120500||ADT^{trigger}^ADT_A01|{control}|P|2.5.1\r"
        f"EVN|{trigger}|20260301120500\r"
        f"PID|1||{mrn}^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
    )


def _hl7_snapshot(tmp_path: Path, messages: list[str], *, baseline: bool = True) -> Path:
    writer = SnapshotWriter(tmp_path / "hl7")
    for message in messages:
        writer.add_hl7(message)
    if baseline:
        writer.add_baseline("hl7", {})
    return writer.close()


def test_hl7_messages_are_allowed_by_type_trigger_and_fields(tmp_path: Path) -> None:
    root = _hl7_snapshot(tmp_path, [_adt("C1", "MRN1"), _adt("C2", "MRN2"), _adt("C3", "MRN1", "A03")])
    allow = [{"message_type": "ADT^A08", "where": {"PID.3.1": "MRN1"}}]
    run = verify(root, surfaces=["hl7"], allow=allow)
    assert run["passed"] is False and run["status"] == "ok"
    assert run["evidence"]["unexpected"] == [
        {"surface": "hl7", "key": "outbound/2", "change": "created", "allowed": None,
         "message_type": "ADT^A08", "control_id": "C2"},
        {"surface": "hl7", "key": "outbound/3", "change": "created", "allowed": None,
         "message_type": "ADT^A03", "control_id": "C3"},
    ]  # fmt: skip
    assert "created HL7 ADT^A08 outbound/2" in run["details"]
    # `ADT` alone covers any trigger; aliases work as in hl7-structural's correlate_by
    assert verify(root, allow=[{"message_type": "ADT"}])["passed"] is True
    by_alias = verify(root, allow=[{"message_type": "ADT", "where": {"control_id": "C2"}}])
    assert [c["key"] for c in by_alias["evidence"]["unexpected"]] == ["outbound/1", "outbound/3"]


def test_max_catches_a_duplicate_order(tmp_path: Path) -> None:
    root = _hl7_snapshot(tmp_path, [_adt("C1", "MRN1"), _adt("C1", "MRN1")])
    run = verify(root, allow=[{"message_type": "ADT^A08", "max": 1}])
    assert [c["allowed"] for c in run["evidence"]["changes"]] == [0, None]
    assert run["passed"] is False
    fhir = snapshot(tmp_path / "f", [ALICE, BOB, appointment("a1", "alice"), appointment("a2", "alice")])
    twice = verify(fhir, allow=[{"resourceType": "Appointment", "change": "created", "max": 1}])
    assert [c["key"] for c in twice["evidence"]["unexpected"]] == ["Appointment/a2"]


def _portal_snapshot(tmp_path: Path, final: list[PortalRow], seeded: list[PortalRow] | None) -> Path:
    writer = SnapshotWriter(tmp_path / "portal")
    for row in final:
        writer.add_portal_row(row)
    if seeded is not None:
        writer.add_baseline("portal", portal_digests(seeded))
    return writer.close()


PATIENTS = [
    PortalRow(0, "patients", {"member_id": "M1", "name": "Ann Lee"}),
    PortalRow(1, "patients", {"member_id": "M2", "name": "Bo Diaz"}),
]


def test_portal_rows_created_and_updated_against_the_seeded_rows(tmp_path: Path) -> None:
    request = PortalRow(0, "prior_auth_requests", {"request_id": "PA1", "patient": {"member_id": "M1"}})
    wrong = PortalRow(1, "patients", {"member_id": "M2", "name": "Bo Diaz", "phone": "555"})
    aetna = PortalRow(0, "patients", {"member_id": "M9"}, "aetna")
    root = _portal_snapshot(tmp_path, [PATIENTS[0], wrong, request, aetna], PATIENTS)
    allow = [
        {"resource": "prior_auth_requests", "change": "created", "where": {"patient.member_id": "M1"}},
        {"resource": "patients", "where": {"member_id": "M1"}},
    ]
    run = verify(root, surfaces=["portal"], allow=allow)
    assert run["passed"] is False
    assert run["evidence"]["unexpected"] == [
        {"surface": "portal", "key": "aetna/patients/0", "change": "created", "allowed": None,
         "resource": "patients", "portal": "aetna"},
        {"surface": "portal", "key": "patients/1", "change": "updated", "allowed": None,
         "resource": "patients", "portal": None},
    ]  # fmt: skip
    allowed = {c["key"]: c["allowed"] for c in run["evidence"]["changes"]}
    assert allowed["prior_auth_requests/0"] == 0
    other = [{"resource": "prior_auth_requests", "where": {"patient.member_id": "M2"}}]
    assert "prior_auth_requests/0" in [c["key"] for c in verify(root, allow=other)["evidence"]["unexpected"]]
    fine = [
        *allow,
        {"resource": "patients", "portal": "aetna"},
        {"resource": "patients", "change": "updated"},
    ]
    assert verify(root, allow=fine)["passed"] is True


def test_files_change_kind_and_a_missing_portal_baseline(tmp_path: Path) -> None:
    import hashlib

    seeded = SnapshotFile("inbound/referral.pdf", b"%PDF-1.4 seeded", seeded=True)
    baseline = {seeded.path: hashlib.sha256(seeded.content).hexdigest()}
    root = snapshot(tmp_path, SEEDED, files=[SnapshotFile("outbound/a.pdf", b"a")], seeded_files=baseline)
    created_only = verify(root, surfaces=["files"], allow=[{"path": "*", "change": "created"}])
    assert [(c["key"], c["change"]) for c in created_only["evidence"]["unexpected"]] == [
        ("inbound/referral.pdf", "deleted")
    ]
    asked = verify(root, surfaces=["files", "portal"])
    assert asked["status"] == "error" and "portal" in asked["details"]


def test_allow_entries_of_each_surface_are_validated() -> None:
    bad = [
        ({"message_type": "ADT A08"}, "allow.0.message_type"),
        ({"message_type": "ADT", "where": {"PID..3": "x"}}, "allow.0.where"),
        ({"resource": "a/b"}, "allow.0.resource"),
        ({"resource": "patients", "where": {"a..b": 1}}, "allow.0.where"),
        ({"path": "x", "max": 0}, "allow.0.max"),
        ({"path": "x", "resource": "patients"}, "allow.0"),
        ({"nothing": 1}, "allow.0"),
    ]
    for entry, key in bad:
        with pytest.raises(AssertionInvalid) as caught:
            parse_assertion({"assert": "no-unexpected-changes", "allow": [entry]})
        assert list(caught.value.errors) == [key], (entry, caught.value.errors)


def _x12_snapshot(tmp_path: Path, *requests: str, baseline: bool = True) -> Path:
    from assay.core.state import X12Record

    writer = SnapshotWriter(tmp_path / "x12snap")
    for i, request in enumerate(requests, 1):
        writer.add_x12(X12Record(i, response="ISA*00~", request=request, record_id=f"x12_{i}"))
    if baseline:
        writer.add_baseline("x12", {})
    return writer.close()


def test_x12_review_requests_are_changes_inquiries_are_not(tmp_path: Path) -> None:
    from tests.sandboxes.x12.requests import eligibility_270, interchange, review_278, subscriber_270

    inquiry = interchange("270", eligibility_270(subscriber_270("W1", trace="T1", last="DOE", first="JANE")))
    for_w1 = interchange("278", review_278("W1", "70551", trace="TR1"))
    for_w2 = interchange("278", review_278("W2", "70551", trace="TR2"))
    root = _x12_snapshot(tmp_path, inquiry, for_w1, "not x12 at all", for_w2, for_w1)
    only_w1 = [{"transaction_set": "278", "member_id": "W1", "max": 1}]
    run = verify(root, surfaces=["x12"], allow=only_w1)
    # the 270 (an inquiry) and the refused garbage changed nothing; the 278s each opened a case
    assert [
        (c["key"], c["transaction_set"], c["member_ids"], c["allowed"]) for c in run["evidence"]["changes"]
    ] == [
        ("exchanges/2", "278", ["W1"], 0),
        ("exchanges/4", "278", ["W2"], None),
        ("exchanges/5", "278", ["W1"], None),  # the duplicate request: one too many
    ]
    assert run["passed"] is False and run["status"] == "ok"
    assert "X12 278 exchanges/4" in run["details"] and "X12 278 exchanges/5" in run["details"]
    assert verify(root, surfaces=["x12"], allow=[{"transaction_set": "278"}])["passed"] is True
    assert verify(_x12_snapshot(tmp_path / "b", inquiry), surfaces=["x12"])["passed"] is True


def test_an_x12_snapshot_without_its_baseline_is_an_error(tmp_path: Path) -> None:
    from tests.sandboxes.x12.requests import interchange, review_278

    root = _x12_snapshot(tmp_path, interchange("278", review_278("W1", "70551")), baseline=False)
    run = verify(root, surfaces=["x12"])
    assert run["status"] == "error" and "no seeded baseline recorded for x12" in run["details"]


def test_voice_is_not_compared_refused_at_create_and_an_error_at_verify(tmp_path: Path) -> None:
    with pytest.raises(AssertionInvalid) as caught:
        parse_assertion({"assert": "no-unexpected-changes", "surfaces": ["fhir", "voice"]})
    (messages,) = caught.value.errors.values()
    assert "voice is not compared" in messages[0] and "voice-transcript" in messages[0]
    # a stored or offline criterion asking for voice is judged `error` with the reason, never a pass
    run = verify(snapshot(tmp_path, SEEDED), surfaces=["voice"])
    assert run["status"] == "error" and run["passed"] is False
    assert "a call changes no record" in run["details"]


def test_x12_allow_entries_are_validated() -> None:
    for entry, key in [
        ({"transaction_set": "27"}, "allow.0.transaction_set"),
        ({"transaction_set": "270"}, "allow.0.transaction_set"),
        ({"transaction_set": "278", "member_id": ""}, "allow.0.member_id"),
        ({"transaction_set": "278", "path": "x"}, "allow.0"),
    ]:
        with pytest.raises(AssertionInvalid) as caught:
            parse_assertion({"assert": "no-unexpected-changes", "allow": [entry]})
        assert list(caught.value.errors) == [key], (entry, caught.value.errors)


def test_every_surface_asked_and_one_holds_state_without_a_baseline(tmp_path: Path) -> None:
    """`surfaces` left out: FHIR has its baseline, the files surface holds a file but records none
    (a snapshot from before files baselines): `error` naming files, not a pass over FHIR alone."""
    root = snapshot(tmp_path, SEEDED, files=[SnapshotFile("outbound/a.pdf", b"a")])
    run = verify(root)
    assert run["status"] == "error" and "no seeded baseline recorded for files" in run["details"]
    assert verify(snapshot(tmp_path / "b", SEEDED))["passed"] is True  # no files at all: nothing to judge
