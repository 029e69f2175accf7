"""Benchmark packages shipped with Assay, by the name `assay push`, `assay lint`, `assay publish`
and `assay demo --benchmark` take when no folder of that name exists (docs/benchmarks/)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED", "bundled_package"]

BUNDLED: dict[str, Path] = {
    "front-office": Path(__file__).parent / "front_office",
    "front-office-demo": Path(__file__).parent.parent / "demo" / "front_office",
}
"""Bundled name → package folder. `front-office` is the benchmark (docs/benchmarks/front-office.md);
`front-office-demo` is the seven-task package `assay demo` runs to show the checks."""


def bundled_package(reference: str | Path) -> Path | None:
    """The bundled package `reference` names, unless a folder of that name exists (a folder the
    user has always wins over a bundled package)."""
    given = str(reference)
    if Path(given).exists():
        return None
    return BUNDLED.get(given)
