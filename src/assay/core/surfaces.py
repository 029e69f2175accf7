"""The names of the sandbox surfaces, as the verification core knows them.

The list of surfaces is `assay.sandboxes.registry`; the core sits below the sandboxes and cannot
import it, so the registry hands its names down here (`use_surface_names`) whenever it changes.
`BUILT_IN` is what the core knows before any registry is loaded (`assay verify` alone), and a test
keeps it equal to the registry's names.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["BUILT_IN", "known_surface", "surface_names", "use_surface_names"]

BUILT_IN = frozenset({"fhir", "hl7", "x12", "voice", "portal", "files"})

_names: frozenset[str] = BUILT_IN


def use_surface_names(names: Iterable[str]) -> None:
    """Make `names` the surfaces a criterion may name (the registry calls it)."""
    global _names
    _names = frozenset(names)


def surface_names() -> frozenset[str]:
    return _names


def known_surface(name: str) -> str:
    """`name` when it is a surface's name; else ValueError listing them (a 422 at create)."""
    if name not in _names:
        raise ValueError(f"{name!r} is not a surface: one of {', '.join(sorted(_names))}")
    return name
