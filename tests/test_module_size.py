"""No source module grows past 500 lines: a module that size holds more than one responsibility and
is split by responsibility, not by line count. Generated tables and database migrations are exempt
(nobody reads them top to bottom)."""

from __future__ import annotations

from pathlib import Path

import assay

MAX_LINES = 500
SOURCE = Path(assay.__file__).parent
GENERATED = {"formats/fhir/_search_parameters.py"}


def _exempt(relative: str) -> bool:
    return relative in GENERATED or relative.startswith("store/migrations/")


def test_no_module_is_over_the_limit() -> None:
    oversized = {}
    for path in sorted(SOURCE.rglob("*.py")):
        relative = path.relative_to(SOURCE).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and not _exempt(relative):
            oversized[relative] = lines
    assert oversized == {}, f"modules over {MAX_LINES} lines; split them by responsibility: {oversized}"


def test_every_exemption_names_a_module_that_exists() -> None:
    for relative in GENERATED:
        assert (SOURCE / relative).is_file(), f"{relative} is exempt from the size limit but does not exist"
