"""`fhir-resource-state` end to end: snapshots of the bundled Synthea files and R4 examples,
judged through `verify_task` and through `assay verify` (SPEC §3.2, §7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import FIXTURES
from typer.testing import CliRunner

from assay.clients.cli import app
from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid
from assay.formats.fhir import resources_from_bundle
from assay.snapshot import open_snapshot, write_snapshot
from assay.snapshot.reader import SnapshotState
from assay.verify import CriterionSpec, TaskVerification, verify_task

FHIR = FIXTURES / "fhir"
ALFREDA = "6d23a95e-7e18-4201-90ec-9501fa89fbd2"

SEED_004_APPOINTMENT = {
    "resourceType": "Appointment",
    "id": "appt-rivera",
    "meta": {"versionId": "2", "lastUpdated": "2025-03-01T10:00:00Z"},
    "status": "booked",
    "start": "2025-03-10T09:00:00Z",
    "end": "2025-03-10T09:30:00Z",
    "participant": [
        {"actor": {"reference": "Practitioner/rivera", "display": "Dr. Rivera"}, "status": "accepted"},
        {"actor": {"reference": "Patient/john-smith", "display": "John Smith"}, "status": "accepted"},
    ],
}
"""The booked appointment seed 004's example criterion looks for (`participant.0.actor.display`)."""
CANCELLED = {
    **SEED_004_APPOINTMENT,
    "id": "appt-cancelled",
    "meta": {"versionId": "1", "lastUpdated": "2025-02-01T10:00:00Z"},
    "status": "cancelled",
}


def _synthea() -> list[dict[str, Any]]:
    resources: list[dict[str, Any]] = []
    files = sorted((FHIR / "synthea").glob("*/*.json"))
    assert len(files) == 18
    for path in files:
        resources.extend(resources_from_bundle(json.loads(path.read_text(encoding="utf-8"))))
    return resources


def _r4_examples() -> list[dict[str, Any]]:
    resources = []
    for path in sorted((FHIR / "r4-examples").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "resourceType" in data and "id" in data:
            resources.append(data)
    return resources


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fhir") / "snapshot"
    return write_snapshot(root, fhir=[*_synthea(), *_r4_examples(), SEED_004_APPOINTMENT, CANCELLED])


@pytest.fixture(scope="module")
def state(snapshot_dir: Path) -> SnapshotState:
    return open_snapshot(snapshot_dir)


def verify(state: SnapshotState, *assertions: dict[str, Any]) -> TaskVerification:
    specs = [CriterionSpec(assertion={"assert": "fhir-resource-state", **a}) for a in assertions]
    return verify_task(specs, state)


def one(state: SnapshotState, assertion: dict[str, Any]) -> dict[str, Any]:
    return verify(state, assertion).as_json()["criterion_runs"][0]


# -- found ------------------------------------------------------------------------------------


def test_seed_004_appointment(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Appointment",
            "search": {"patient": "Patient/john-smith", "status": "booked"},
            "fields": [
                {"path": "participant.0.actor.display", "expected": "Dr. Rivera"},
                {"path": "status", "expected": "booked"},
            ],
        },
    )
    assert run["passed"] is True
    assert run["details"] == "Appointment/appt-rivera matched; 2 of 2 field assertions passed."
    assert run["evidence"] == {
        "fieldResults": [
            {
                "path": "participant.0.actor.display",
                "expected": "Dr. Rivera",
                "actual": "Dr. Rivera",
                "passed": True,
            },
            {"path": "status", "expected": "booked", "actual": "booked", "passed": True},
        ],
        "resource": "Appointment/appt-rivera",
        "candidates": 1,
    }


def test_patient_by_family_and_birthdate_with_a_repeating_element(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Patient",
            "search": {"family": "Wyman", "birthdate": "1980-10-28"},
            "fields": [
                {"path": "name.given", "expected": "Alfreda"},
                {"path": "address.0.city", "expected": "Wilmington"},
                {"path": "telecom.value", "operator": "notEmpty"},
            ],
        },
    )
    assert run["score"] == 1.0
    assert run["evidence"]["resource"] == f"Patient/{ALFREDA}"


def test_observation_by_loinc_and_subject_with_fhirpath(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Observation",
            "search": {"subject": f"Patient/{ALFREDA}", "code": "http://loinc.org|8302-2"},
            "match": "all",
            "fields": [
                {"fhirpath": "Observation.valueQuantity.unit", "expected": "cm"},
                {"fhirpath": "valueQuantity.value > 100", "expected": True},
                {"fhirpath": "code.coding.where(system='http://loinc.org').code", "expected": "8302-2"},
            ],
        },
    )
    assert run["passed"] is True
    assert run["evidence"]["candidates"] == 5
    assert run["evidence"]["fieldResults"][0]["fhirpath"] == "Observation.valueQuantity.unit"


def test_encounters_in_a_date_range(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Encounter",
            "search": {"patient": ALFREDA, "date": ["ge2012-01-01", "lt2013-01-01"], "_sort": "date"},
            "match": "first",
            "fields": [{"path": "period.start", "expected": "2012-03-06T20:43:11+00:00"}],
        },
    )
    assert run["passed"] is True
    assert run["evidence"]["candidates"] == 3


def test_sort_count_and_latest(state: SnapshotState) -> None:
    youngest = {"path": "birthDate", "expected": "2020-10-20"}
    dated = {"_sort": "birthdate", "birthdate:missing": "false"}
    latest = one(
        state, {"resource_type": "Patient", "search": dated, "match": "latest", "fields": [youngest]}
    )
    assert latest["passed"] is True
    capped = one(
        state,
        {
            "resource_type": "Patient",
            "search": {"_sort": "-birthdate", "_count": "1"},
            "match": "all",
            "fields": [youngest],
        },
    )
    assert capped["passed"] is True
    assert capped["evidence"]["candidates"] == 1


def test_modifiers_missing_not_exact_contains(state: SnapshotState) -> None:
    results = verify(
        state,
        {
            "resource_type": "Patient",
            "search": {"family:exact": "Mejía"},
            "fields": [{"path": "name.0.given.0", "expected": "Gustavo"}],
        },
        {
            "resource_type": "Patient",
            "search": {"family:contains": "ejí"},
            "fields": [{"path": "name.0.family", "expected": "Mejía"}],
        },
        {
            "resource_type": "Patient",
            "search": {"death-date:missing": "false", "family": "Thompson"},
            "match": "all",
            "fields": [{"path": "deceasedDateTime", "operator": "notEmpty"}],
        },
        {
            "resource_type": "Appointment",
            "search": {"status:not": "booked", "patient": "Patient/john-smith"},
            "fields": [{"path": "status", "expected": "cancelled"}],
        },
    )
    assert [run.result.passed for run in results.runs] == [True, True, True, True]
    assert results.score.verdict == "pass"


def test_match_any_prefers_the_best_then_the_latest(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Appointment",
            "search": {"patient": "Patient/john-smith"},
            "fields": [{"path": "participant.actor.display", "expected": "Dr. Rivera"}],
        },
    )
    assert run["evidence"]["resource"] == "Appointment/appt-rivera"
    assert run["evidence"]["candidates"] == 2


def test_partial_score(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Appointment",
            "search": {"_id": "appt-rivera"},
            "fields": [
                {"path": "status", "expected": "booked"},
                {"path": "participant.0.actor.display", "expected": "Dr. Who"},
            ],
        },
    )
    assert run["score"] == 0.5
    assert run["details"] == "Appointment/appt-rivera matched; 1 of 2 field assertions passed."


# -- not found and bad input --------------------------------------------------------------------


def test_no_target_lists_every_field(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Appointment",
            "search": {"patient": "Patient/x", "status": "booked"},
            "fields": [{"path": "status", "expected": "booked"}, {"fhirpath": "id", "expected": "1"}],
        },
    )
    assert run["score"] == 0.0
    assert run["details"] == "No Appointment matched patient=Patient/x&status=booked."
    assert run["evidence"] == {
        "fieldResults": [
            {"path": "status", "expected": "booked", "actual": None, "passed": False},
            {"fhirpath": "id", "expected": "1", "actual": None, "passed": False},
        ],
        "resource": None,
        "candidates": 0,
    }


def test_unknown_search_parameter_is_unsupported(state: SnapshotState) -> None:
    run = one(state, {"resource_type": "Appointment", "search": {"shoe-size": "9"}})
    assert run["status"] == "ok"
    assert run["score"] == 0.0
    assert run["details"] == "unsupported assertion: unknown search parameter shoe-size"
    chained = one(state, {"resource_type": "Observation", "search": {"subject.shoe-size": "9"}})
    assert chained["details"] == "unsupported assertion: unknown search parameter subject.shoe-size"


def test_bad_date_is_a_failed_criterion(state: SnapshotState) -> None:
    run = one(state, {"resource_type": "Encounter", "search": {"date": "ge2019-02-30"}})
    assert run["status"] == "ok"
    assert run["passed"] is False
    assert "invalid date '2019-02-30' for date" in run["details"]


def test_invalid_fhirpath_fails_the_field_at_verify(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Patient",
            "search": {"_id": ALFREDA},
            "fields": [
                {"fhirpath": "name.where(", "expected": "x"},
                {"path": "gender", "expected": "female"},
            ],
        },
    )
    assert run["status"] == "ok"
    assert run["score"] == 0.5
    assert "FHIRPath syntax error" in run["details"]
    assert run["evidence"]["fieldResults"][0]["passed"] is False


def test_fhirpath_that_fails_at_runtime(state: SnapshotState) -> None:
    run = one(
        state,
        {
            "resource_type": "Patient",
            "search": {"_id": ALFREDA},
            "fields": [{"fhirpath": "name.given.substring(1)", "expected": "x"}],
        },
    )
    assert run["score"] == 0.0
    assert "FHIRPath evaluation failed" in run["evidence"]["fieldResults"][0]["error"]


def test_unknown_resource_type_is_unsupported(state: SnapshotState) -> None:
    run = one(state, {"resource_type": "Appointmnet"})
    assert run["details"].startswith("unsupported assertion: unknown FHIR R4 resource type Appointmnet")


# -- create-time validation (422) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("assertion", "key", "message"),
    [
        (
            {"resource_type": "Appointment", "search": {"shoe-size": "9"}},
            "search",
            "unknown search parameter shoe-size",
        ),
        (
            {"resource_type": "Patient", "search": {"_sort": "-nope"}},
            "search",
            "unknown search parameter nope",
        ),
        ({"resource_type": "Nope"}, "resource_type", "unknown FHIR R4 resource type Nope"),
        (
            {"resource_type": "Patient", "fields": [{"fhirpath": "name.where(", "expected": 1}]},
            "fields.0.fhirpath",
            "invalid FHIRPath: FHIRPath syntax error",
        ),
        (
            {"resource_type": "Patient", "fields": [{"fhirpath": "name.frobnicate()", "expected": 1}]},
            "fields.0.fhirpath",
            "invalid FHIRPath: unknown FHIRPath function frobnicate()",
        ),
    ],
)
def test_invalid_assertions_are_rejected_at_create(assertion: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(AssertionInvalid) as caught:
        parse_assertion({"assert": "fhir-resource-state", **assertion})
    assert list(caught.value.errors) == [key]
    assert caught.value.errors[key][0].startswith(message)


def test_valid_assertion_with_values_checked_only_at_verify() -> None:
    parsed = parse_assertion(
        {
            "assert": "fhir-resource-state",
            "resource_type": "Encounter",
            "search": {
                "date": "not-a-date",
                "_count": "5",
                "_include": "Encounter:patient",
                "status:not": "x",
            },
        }
    )
    assert parsed.resource_type == "Encounter"


# -- the command line ---------------------------------------------------------------------------


def test_assay_verify_cli(snapshot_dir: Path, tmp_path: Path) -> None:
    task = {
        "criteria": [
            {
                "label": "appointment booked",
                "assertion": {
                    "assert": "fhir-resource-state",
                    "resource_type": "Appointment",
                    "search": {"patient": "Patient/john-smith", "status": "booked"},
                    "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
                },
            },
            {
                "label": "unknown parameter",
                "assertion": {
                    "assert": "fhir-resource-state",
                    "resource_type": "Appointment",
                    "search": {"bogus": "1"},
                },
            },
        ]
    }
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(task))
    result = CliRunner().invoke(app, ["verify", str(task_file), str(snapshot_dir), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["score"] == 0.5
    assert body["verdict"] == "partial"
    first, second = body["criterion_runs"]
    assert first["passed"] is True
    assert first["evidence"]["resource"] == "Appointment/appt-rivera"
    assert second["details"] == "unsupported assertion: unknown search parameter bogus"


def test_assay_verify_cli_with_a_yaml_task_and_numeric_search_values(
    snapshot_dir: Path, tmp_path: Path
) -> None:
    task_file = tmp_path / "task.yaml"
    task_file.write_text(
        "criteria:\n"
        "  - label: youngest Synthea patient\n"
        "    assertion:\n"
        "      assert: fhir-resource-state\n"
        "      resource_type: Patient\n"
        "      search: {_tag: 'https://smarthealthit.org/tags|synthea-5-2019', _sort: -birthdate, _count: 1}\n"
        "      match: first\n"
        "      fields:\n"
        "        - {path: name.0.family, expected: Wiegand}\n"
        '        - {fhirpath: "birthDate > @2020-01-01", expected: true}\n'
    )
    result = CliRunner().invoke(app, ["verify", str(task_file), str(snapshot_dir), "--json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["criterion_runs"]
    assert run["passed"] is True, run["details"]
    assert run["evidence"]["candidates"] == 1
