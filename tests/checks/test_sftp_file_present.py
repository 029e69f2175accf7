"""`sftp-file-present` end to end: real CSV drops as uploaded files → snapshot → verify_task.

Uploaded files are the Synthea CSV export and the Herophilus reporting examples from
`tests/fixtures/sftp/` (provenance in tests/fixtures/SOURCES.md); the JSON file is one Synthea
patient row turned into JSON, as an agent writing a summary would.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import FIXTURES

from assay.checks.sftp_file_present import glob_regex
from assay.core.errors import SnapshotError
from assay.core.operators import compile_pattern
from assay.snapshot import SnapshotFile, open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

SYNTHEA = FIXTURES / "sftp/synthea-csv"
HEROPHILUS = FIXTURES / "sftp/herophilus"
PATIENTS_CSV = (SYNTHEA / "patients.csv").read_bytes()
FIRST_PATIENT = next(csv.DictReader(io.StringIO(PATIENTS_CSV.decode("utf-8"))))


def uploads() -> list[SnapshotFile]:
    """The agent's uploads, oldest first, plus one file a dataset seeded."""
    files = [
        SnapshotFile(
            "outbound/patients.csv",
            PATIENTS_CSV,
            uploaded_at="2026-03-01T10:00:00.000Z",
            content_type="text/csv",
            metadata={"batch": "2026-03-01", "uploader": "agent"},
        ),
        SnapshotFile(
            "exports/patient.json",
            json.dumps({"patient": FIRST_PATIENT, "tags": ["intake", "synthea"]}).encode(),
            uploaded_at="2026-03-01T10:05:00.000Z",
        ),
        SnapshotFile(
            "claims.csv", (SYNTHEA / "claims.csv").read_bytes(), uploaded_at="2026-03-01T10:06:00.000Z"
        ),
    ]
    for minute, path in enumerate(sorted(HEROPHILUS.iterdir())):
        files.append(
            SnapshotFile(
                f"reports/{path.name}", path.read_bytes(), uploaded_at=f"2026-03-01T11:{minute:02d}:00.000Z"
            )
        )
    files.append(SnapshotFile("reference/payers.csv", (SYNTHEA / "payers.csv").read_bytes(), seeded=True))
    files.append(SnapshotFile("reports/.hidden.csv", b"x\n", uploaded_at="2026-03-01T12:00:00.000Z"))
    return files


def run(tmp_path: Path, **assertion: Any) -> dict[str, Any]:
    root = tmp_path / "snapshot"
    if not root.exists():
        write_snapshot(root, files=uploads())
    spec = CriterionSpec({"assert": "sftp-file-present", **assertion})
    return verify_task([spec], open_snapshot(root)).as_json()["criterion_runs"][0]


def test_exact_path_with_sidecar_keys(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        path="/outbound/patients.csv",
        fields=[
            {"key": "name", "expected": "patients.csv"},
            {"key": "size", "expected": str(len(PATIENTS_CSV))},
            {"key": "sha256", "expected": hashlib.sha256(PATIENTS_CSV).hexdigest()},
            {"key": "content_type", "expected": "text/csv"},
            {"key": "uploaded_at", "operator": "lessThan", "expected": "2026-03-02"},
            {"key": "batch", "expected": "2026-03-01"},
        ],
    )
    assert result["passed"] is True, result["details"]
    assert result["details"] == "outbound/patients.csv matched; 6 of 6 field assertions passed."
    assert result["evidence"]["matchedPaths"] == ["outbound/patients.csv"]
    assert result["evidence"]["fieldResults"][0] == {
        "key": "name",
        "expected": "patients.csv",
        "actual": "patients.csv",
        "passed": True,
    }


def test_pattern_lists_every_match_sorted_and_judges_the_best(tmp_path: Path) -> None:
    result = run(
        tmp_path, path_pattern="reports/*.csv", fields=[{"key": "name", "expected": "ReportingExample.csv"}]
    )
    names = sorted(f"reports/{p.name}" for p in HEROPHILUS.iterdir())
    assert result["evidence"]["matchedPaths"] == sorted([*names, "reports/.hidden.csv"])
    assert result["passed"] is True
    assert result["details"].startswith("reports/ReportingExample.csv matched;")


def test_double_star_matches_zero_or_more_segments(tmp_path: Path) -> None:
    everywhere = run(tmp_path, path_pattern="**/*.csv")
    assert "claims.csv" in everywhere["evidence"]["matchedPaths"]
    assert "outbound/patients.csv" in everywhere["evidence"]["matchedPaths"]
    top_only = run(tmp_path, path_pattern="*.csv")
    assert top_only["evidence"]["matchedPaths"] == ["claims.csv"]
    assert run(tmp_path, path_pattern="REPORTS/*.csv")["score"] == 0.0


def test_seeded_files_count_only_with_include_seeded(tmp_path: Path) -> None:
    untouched = run(tmp_path, path="reference/payers.csv")
    assert untouched["score"] == 0.0
    assert untouched["details"] == "No file matched path reference/payers.csv."
    assert untouched["evidence"] == {"fieldResults": [], "matchedPaths": []}
    assert run(tmp_path, path="reference/payers.csv", include_seeded=True)["passed"] is True


def test_json_content_fields(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        path="exports/patient.json",
        parse_json=True,
        fields=[
            {"path": "patient.FIRST", "expected": FIRST_PATIENT["FIRST"]},
            {"path": "patient.HEALTHCARE_EXPENSES", "operator": "greaterThan", "expected": 1000},
            {"path": "tags", "operator": "contains", "expected": "intake"},
            {"path": "tags.1", "expected": "synthea"},
            {"path": "patient.DEATHDATE", "operator": "empty"},
            {"key": "content_type", "expected": "application/json"},
        ],
    )
    assert result["passed"] is True, result["details"]


def test_csv_with_parse_json_fails_only_the_content_fields(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        path="outbound/patients.csv",
        parse_json=True,
        fields=[{"key": "name", "expected": "patients.csv"}, {"path": "Id", "operator": "notEmpty"}],
    )
    assert result["score"] == 0.5
    assert "outbound/patients.csv is not valid JSON" in result["details"]
    entry = result["evidence"]["fieldResults"][1]
    assert entry["actual"] is None and entry["passed"] is False
    assert "not valid JSON" in entry["error"]


def test_path_field_without_parse_json_fails_with_the_reason(tmp_path: Path) -> None:
    result = run(
        tmp_path, path="exports/patient.json", fields=[{"path": "patient.FIRST", "operator": "exists"}]
    )
    assert result["score"] == 0.0
    assert "needs parse_json: true" in result["details"]
    assert result["details"].startswith("exports/patient.json matched; 0 of 1 field assertions passed.")


def test_match_modes_over_files_in_upload_order(tmp_path: Path) -> None:
    fields = [{"key": "name", "expected": "ReportingExample.csv"}]
    assert run(tmp_path, path_pattern="reports/*", match="first", fields=fields)["score"] == 0.0
    latest = run(tmp_path, path_pattern="reports/*", match="latest", fields=fields)
    assert latest["details"].startswith("reports/.hidden.csv matched; 0 of 1")
    everything = run(
        tmp_path,
        path_pattern="reports/*",
        match="all",
        fields=[{"key": "size", "operator": "greaterThan", "expected": 0}],
    )
    assert everything["passed"] is True


def test_invalid_regex_fails_the_field_at_verify(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        path="claims.csv",
        fields=[
            {"key": "name", "operator": "matches", "expected": "claims(\\.csv"},
            {"key": "name", "expected": "claims.csv"},
        ],
    )
    assert result["status"] == "ok"
    assert result["score"] == 0.5
    assert "invalid regular expression" in result["details"]
    assert "invalid regular expression" in result["evidence"]["fieldResults"][0]["error"]


def test_invalid_assertions_are_unsupported_not_fatal(tmp_path: Path) -> None:
    both = run(tmp_path, path="a.csv", path_pattern="*.csv")
    assert both["details"].startswith("unsupported assertion: exactly one of path / path_pattern")
    neither_locator = run(tmp_path, path="a.csv", fields=[{"expected": 1}])
    assert neither_locator["details"].startswith("unsupported assertion:")
    assert "fields.0" in neither_locator["details"]


def test_missing_snapshot_folder_raises_snapshot_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="snapshot not found"):
        open_snapshot(tmp_path / "does-not-exist")


# -- the glob compiler ---------------------------------------------------------------------------

_SEGMENT_CHARS = st.sampled_from(["a", "b", ".", "-", "é", "A", "+", "("])
_SEGMENTS = st.text(_SEGMENT_CHARS, min_size=1, max_size=4)
_PATHS = st.lists(_SEGMENTS, min_size=1, max_size=4).map("/".join)
_GLOB_SEGMENTS = st.lists(st.one_of(_SEGMENT_CHARS, st.just("*"), st.just("?")), min_size=1, max_size=4).map(
    "".join
)
_GLOBS = st.lists(st.one_of(_GLOB_SEGMENTS, st.just("**")), min_size=1, max_size=4).map("/".join)


def _reference_match(glob: str, path: str) -> bool:
    """An independent matcher: recursive over segments, `fnmatch`-like within one segment."""

    def segment(pattern: str, text: str) -> bool:
        if not pattern:
            return not text
        if pattern[0] == "*":
            return any(segment(pattern[1:], text[i:]) for i in range(len(text) + 1))
        if not text:
            return False
        return (pattern[0] == "?" or pattern[0] == text[0]) and segment(pattern[1:], text[1:])

    def segments(patterns: list[str], parts: list[str]) -> bool:
        if not patterns:
            return not parts
        if patterns[0] == "**":
            if len(patterns) == 1:
                return bool(parts)
            return any(segments(patterns[1:], parts[i:]) for i in range(len(parts) + 1))
        return bool(parts) and segment(patterns[0], parts[0]) and segments(patterns[1:], parts[1:])

    return segments(glob.split("/"), path.split("/"))


@given(_GLOBS, _PATHS)
def test_glob_agrees_with_a_reference_matcher(glob: str, path: str) -> None:
    compiled = compile_pattern(glob_regex(glob))
    assert (compiled.search(path) is not None) == _reference_match(glob, path)


@given(_PATHS)
def test_a_path_matches_itself_and_star_never_crosses_a_slash(path: str) -> None:
    assert compile_pattern(glob_regex(path)).search(path)
    assert compile_pattern(glob_regex("**/" + path)).search(path)
    star_only = compile_pattern(glob_regex("*"))
    assert (star_only.search(path) is not None) == ("/" not in path)


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("reports/*.csv", "reports/.hidden.csv", True),
        ("reports/?.csv", "reports/a.csv", True),
        ("reports/?.csv", "reports/ab.csv", False),
        ("**/x.json", "x.json", True),
        ("a/**/x.json", "a/b/c/x.json", True),
        ("a/**/x.json", "a/x.json", True),
        ("a/**", "a/b/c", True),
        ("*.CSV", "a.csv", False),
        ("a.b", "axb", False),
    ],
)
def test_glob_examples(glob: str, path: str, matches: bool) -> None:
    assert bool(re.fullmatch(_python_regex(glob), path)) == matches
    assert (compile_pattern(glob_regex(glob)).search(path) is not None) == matches


def _python_regex(glob: str) -> str:
    return glob_regex(glob).removeprefix("^").removesuffix("$")
