"""The writer refuses names that are not one file of the SPEC §6 layout.

`fhir/<type>/<id>.json`, `portal/<resource>.json` and `portal/<slug>/<resource>.json` take one file
name each; an id `a/b` was written as a nested file the reader lists under another id or skips, and
an empty or NUL name wrote a hidden file or failed with an OS error. The service refuses such ids
upstream; other writers (scripts, the SDK) meet this check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.core.errors import SnapshotError
from assay.core.state import PortalRow
from assay.snapshot import SnapshotFile, open_snapshot, write_snapshot

NOT_FILE_NAMES = ["a/b", "..", ".", "", "a\\b", "a\x00b", "/", "../x"]


@pytest.mark.parametrize("name", NOT_FILE_NAMES)
def test_a_fhir_id_that_names_no_file_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SnapshotError, match=r"unsafe FHIR id in snapshot: .* is not a file name"):
        write_snapshot(tmp_path / "s", fhir=[{"resourceType": "Patient", "id": name}])
    assert not (tmp_path / "s" / "fhir").exists()


@pytest.mark.parametrize("name", NOT_FILE_NAMES)
def test_a_fhir_type_that_names_no_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SnapshotError, match=r"unsafe FHIR resourceType in snapshot"):
        write_snapshot(tmp_path / "s", fhir=[{"resourceType": name, "id": "p1"}])
    assert not (tmp_path / "s" / "fhir").exists()


def test_a_resource_without_an_id_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="unsafe FHIR id in snapshot: None"):
        write_snapshot(tmp_path / "s", fhir=[{"resourceType": "Patient"}])


@pytest.mark.parametrize(
    "row",
    [PortalRow(0, "a/b", {}), PortalRow(0, "..", {}), PortalRow(0, "requests", {}, portal="x/y")],
    ids=["resource-slash", "resource-dot-dot", "slug-slash"],
)
def test_portal_names_that_name_no_file_are_refused(tmp_path: Path, row: PortalRow) -> None:
    with pytest.raises(SnapshotError, match="unsafe portal"):
        write_snapshot(tmp_path / "s", portal=[row])


def test_a_nul_in_a_file_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="unsafe path"):
        write_snapshot(tmp_path / "s", files=[SnapshotFile("in/a\x00b.txt", b"x")])


def test_names_with_dots_and_dashes_read_back(tmp_path: Path) -> None:
    resources = [{"resourceType": "Patient", "id": id_} for id_ in ("a.b", "...", "-1", "x..y")]
    state = open_snapshot(write_snapshot(tmp_path / "s", fhir=resources))
    assert sorted(r["id"] for r in state.fhir_search("Patient", {})) == ["-1", "...", "a.b", "x..y"]
    assert state.warnings == []
