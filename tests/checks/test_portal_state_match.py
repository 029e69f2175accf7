"""`portal-state-match` end to end: portal rows → snapshot → verify_task.

The rows are real Synthea patients and payers (`tests/fixtures/sftp/synthea-csv/`, provenance in
tests/fixtures/SOURCES.md) as a payer portal would hold them: CSV rows as they are (numbers
still strings), plus a nested `member` shape built from the same values.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import FIXTURES

from assay.core.state import PortalRow
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

SYNTHEA = FIXTURES / "sftp/synthea-csv"


def _csv_rows(name: str, limit: int) -> list[dict[str, str]]:
    with (SYNTHEA / name).open(encoding="utf-8") as handle:
        return [row for _, row in zip(range(limit), csv.DictReader(handle), strict=False)]


PATIENTS = _csv_rows("patients.csv", 5)
PAYERS = _csv_rows("payers.csv", 4)
ALICE, BOB = PATIENTS[0], PATIENTS[1]


def member(patient: dict[str, str], status: str) -> dict[str, Any]:
    return {
        "member_id": patient["Id"],
        "name": {"given": patient["FIRST"], "family": patient["LAST"]},
        "birth_date": patient["BIRTHDATE"],
        "status": status,
        "tags": ["synthea", patient["GENDER"]],
    }


def portal_rows() -> list[PortalRow]:
    rows = [PortalRow(i, "patients", patient) for i, patient in enumerate(PATIENTS)]
    rows += [PortalRow(i, "payers", payer, "payer-a") for i, payer in enumerate(PAYERS[:2])]
    rows += [PortalRow(i, "payers", payer, "payer-b") for i, payer in enumerate(PAYERS[2:])]
    rows += [
        PortalRow(0, "members", member(ALICE, "pending")),
        PortalRow(1, "members", member(BOB, "pending")),
        PortalRow(2, "members", member(ALICE, "approved")),
        PortalRow(3, "members", {"status": "draft"}),
    ]
    return rows


def run(
    tmp_path: Path, assertion: dict[str, Any], manifest: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    root = write_snapshot(tmp_path / "snapshot", manifest=manifest, portal=portal_rows())
    criterion = CriterionSpec({"assert": "portal-state-match", **assertion}, **spec)
    return verify_task([criterion], open_snapshot(root)).as_json()["criterion_runs"][0]


def by(key: str, value: Any = ..., resource: str = "patients") -> dict[str, Any]:
    correlation: dict[str, Any] = {"resource": resource, "key": key}
    if value is not ...:
        correlation["value"] = value
    return correlation


def test_row_by_explicit_value(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        {
            "correlate_by": by("Id", ALICE["Id"]),
            "assertions": [
                {"path": "FIRST", "expected": ALICE["FIRST"]},
                {"path": "HEALTHCARE_EXPENSES", "expected": float(ALICE["HEALTHCARE_EXPENSES"])},
                {"path": "BIRTHDATE", "operator": "lessThan", "expected": "2020"},
            ],
        },
    )
    assert result["passed"] is True, result["details"]
    assert result["details"] == f'patients[Id="{ALICE["Id"]}"] matched; 3 of 3 field assertions passed.'
    assert result["evidence"]["row_key"] == ALICE["Id"]
    assert result["evidence"]["assertionResults"][0] == {
        "path": "FIRST",
        "expected": ALICE["FIRST"],
        "actual": ALICE["FIRST"],
        "passed": True,
    }
    assert result["evidence"]["assertionResults"][2]["operator"] == "lessThan"


def test_expected_objects_and_arrays_compare_deeply(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        {
            "correlate_by": by("member_id", BOB["Id"], resource="members"),
            "assertions": [
                {"path": "name", "expected": {"family": BOB["LAST"], "given": BOB["FIRST"]}},
                {"path": "tags", "expected": ["synthea", BOB["GENDER"]]},
                {"path": "tags", "expected": [BOB["GENDER"], "synthea"]},
                {"path": "tags", "operator": "contains", "expected": "synthea"},
                {"path": "name", "operator": "notEquals", "expected": {"family": BOB["LAST"]}},
            ],
        },
    )
    assert [entry["passed"] for entry in result["evidence"]["assertionResults"]] == [
        True,
        True,
        False,
        True,
        True,
    ]
    assert result["score"] == 0.8


def test_value_comes_from_the_task_input_entity(tmp_path: Path) -> None:
    assertion = {
        "correlate_by": by("member_id", resource="members"),
        "assertions": [{"path": "status", "expected": "approved"}],
    }
    result = run(tmp_path, assertion, manifest={"input_entity": {"member_id": ALICE["Id"]}})
    assert result["passed"] is True
    assert result["evidence"]["row_key"] == ALICE["Id"]


def test_criterion_input_entity_id_wins_over_the_task_entity(tmp_path: Path) -> None:
    manifest = {
        "input_entity": {"member_id": ALICE["Id"]},
        "entities": {"ent_bob": {"member_id": BOB["Id"]}},
    }
    assertion = {
        "correlate_by": by("member_id", resource="members"),
        "assertions": [{"path": "status", "expected": "pending"}],
    }
    result = run(tmp_path, assertion, manifest=manifest, input_entity_id="ent_bob")
    assert result["passed"] is True
    assert result["evidence"]["row_key"] == BOB["Id"]


def test_entity_without_the_key_scores_zero(tmp_path: Path) -> None:
    assertion = {
        "correlate_by": by("member_id", resource="members"),
        "assertions": [{"path": "status", "expected": "approved"}],
    }
    result = run(tmp_path, assertion, manifest={"input_entity": {"patient_id": "x"}})
    assert (result["score"], result["details"]) == (0.0, "input entity has no member_id")
    assert result["evidence"] == {
        "assertionResults": [{"path": "status", "expected": "approved", "actual": None, "passed": False}],
        "row_key": None,
    }


def test_no_value_and_no_entity_makes_every_row_a_candidate(tmp_path: Path) -> None:
    assertion: dict[str, Any] = {
        "correlate_by": by("Id"),
        "assertions": [{"path": "FIRST", "expected": BOB["FIRST"]}],
    }
    assert run(tmp_path / "any", assertion)["passed"] is True
    every = run(tmp_path / "all", {**assertion, "match": "all"})
    assert every["score"] == 0.0
    assert every["evidence"]["row_key"] == PATIENTS[-1]["Id"]


def test_explicit_null_value_is_not_the_same_as_no_value(tmp_path: Path) -> None:
    assertion = {
        "correlate_by": by("member_id", None, resource="members"),
        "assertions": [{"path": "status", "expected": "draft"}],
    }
    result = run(tmp_path, assertion, manifest={"input_entity": {"member_id": ALICE["Id"]}})
    assert result["passed"] is True
    assert result["details"].startswith("members[#4] matched;")


def test_any_prefers_the_best_row_and_ties_go_to_the_latest(tmp_path: Path) -> None:
    correlate = by("member_id", ALICE["Id"], resource="members")
    best = run(
        tmp_path / "a", {"correlate_by": correlate, "assertions": [{"path": "status", "expected": "pending"}]}
    )
    assert best["passed"] is True
    tie = run(
        tmp_path / "b",
        {
            "correlate_by": correlate,
            "assertions": [{"path": "status", "operator": "matches", "expected": "^(pending|approved)$"}],
        },
    )
    assert tie["passed"] is True
    assert tie["evidence"]["assertionResults"][0]["actual"] == "approved"
    first = run(
        tmp_path / "c",
        {
            "correlate_by": correlate,
            "match": "first",
            "assertions": [{"path": "status", "expected": "approved"}],
        },
    )
    assert first["score"] == 0.0
    latest = run(
        tmp_path / "d",
        {
            "correlate_by": correlate,
            "match": "latest",
            "assertions": [{"path": "status", "expected": "approved"}],
        },
    )
    assert latest["passed"] is True


def test_portal_slug_restricts_the_rows(tmp_path: Path) -> None:
    medicare = PAYERS[1]
    assertion: dict[str, Any] = {
        "correlate_by": by("NAME", medicare["NAME"], resource="payers"),
        "assertions": [{"path": "PHONE", "expected": medicare["PHONE"]}],
    }
    assert run(tmp_path / "a", {**assertion, "portal": "payer-a"})["passed"] is True
    elsewhere = run(tmp_path / "b", {**assertion, "portal": "payer-b"})
    assert elsewhere["details"] == f'No payers row in portal payer-b matched NAME = "{medicare["NAME"]}".'
    assert run(tmp_path / "c", {**assertion, "portal": None})["details"].startswith("payer-a/payers[NAME=")


def test_no_matching_row_keeps_the_evidence_shape(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        {"correlate_by": by("Id", "nobody"), "assertions": [{"path": "FIRST", "operator": "exists"}]},
    )
    assert result["details"] == 'No patients row matched Id = "nobody".'
    assert result["evidence"] == {
        "assertionResults": [
            {"path": "FIRST", "expected": None, "actual": None, "passed": False, "operator": "exists"}
        ],
        "row_key": None,
    }
    empty = run(tmp_path / "x", {"correlate_by": by("Id", resource="claims")})
    assert empty["details"] == "No claims row matched (the resource has no rows)."


def test_found_row_without_assertions_scores_one(tmp_path: Path) -> None:
    result = run(tmp_path, {"correlate_by": by("Id", BOB["Id"])})
    assert (result["score"], result["passed"]) == (1.0, True)
    assert result["details"].endswith("0 of 0 field assertions passed.")


@pytest.mark.parametrize(
    ("assertion", "key"),
    [
        ({"correlate_by": {"resource": "patients"}}, "correlate_by.key"),
        (
            {
                "correlate_by": by("Id"),
                "assertions": [{"path": "x", "operator": "greaterThan", "expected": [1]}],
            },
            "assertions.0.expected",
        ),
        ({"correlate_by": by("Id"), "extra": 1}, "extra"),
        ({"correlate_by": by("Id"), "match": "best"}, "match"),
    ],
)
def test_invalid_assertions_are_unsupported(tmp_path: Path, assertion: dict[str, Any], key: str) -> None:
    result = run(tmp_path, assertion)
    assert result["details"].startswith("unsupported assertion:")
    assert f"(at {key})" in result["details"]
    assert (result["score"], result["passed"], result["status"]) == (0.0, False, "ok")
