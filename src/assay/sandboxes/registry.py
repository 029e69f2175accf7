"""Which surfaces exist: the one list of them, one line per surface.

Adding a surface is a package under `sandboxes/` whose class implements `surface.Surface` (usually
by subclassing `BaseSurface`) and one line in `SURFACES`. Everything else — dataset validation and
the dataset types the API accepts, `start`, the routes, listeners, `complete`, the state tar.gz,
the surface names a criterion may give, `assay serve`'s listener port flags, a benchmark package's
bare dataset files — loops over this mapping or the indexes built from it.
`register` adds a surface at run time (a plug-in, a test's throwaway surface) and rebuilds them.
"""

from __future__ import annotations

from typing import Any

from assay.core.surfaces import use_surface_names
from assay.sandboxes.fhir.surface import FhirSandbox
from assay.sandboxes.files.surface import FilesSandbox
from assay.sandboxes.hl7.surface import Hl7Sandbox
from assay.sandboxes.portal.surface import PortalSandbox
from assay.sandboxes.surface import Caching, Discarding, Lifecycle, Preparing, ScenarioStep, Surface
from assay.sandboxes.viewer import Viewer
from assay.sandboxes.voice.surface import VoiceSandbox
from assay.sandboxes.x12.surface import X12Sandbox

__all__ = [
    "CACHING",
    "DATASET_FILES",
    "DATASET_TYPES",
    "DISCARDING",
    "FIELD_OWNERS",
    "LIFECYCLE",
    "PREPARING",
    "SCENARIO_STEPS",
    "SURFACES",
    "VIEWERS",
    "register",
    "surface_for_dataset",
    "unregister",
]

SURFACES: dict[str, Surface] = {
    "fhir": FhirSandbox(),
    "hl7": Hl7Sandbox(),
    "x12": X12Sandbox(),
    "voice": VoiceSandbox(),
    "portal": PortalSandbox(),
    "files": FilesSandbox(),
}
"""Surface name (sandbox type, URL segment, snapshot folder) → surface; in provisioning order."""

DATASET_TYPES: dict[str, Surface] = {}
"""Dataset type (docs/sandboxes.md) → the surface that loads it."""

DATASET_FILES: dict[str, str] = {}
"""A bare dataset's form in a benchmark package (`Surface.dataset_files`: `.fhir.json`, `/`) → its
dataset type."""

SCENARIO_STEPS: dict[str, tuple[Surface, ScenarioStep]] = {}
"""Scenario step name (docs/sandboxes.md) → (its surface, the step); a step no surface offers fails
`start`."""

FIELD_OWNERS: dict[str, str] = {}
"""`SandboxState` method → the name of the surface whose view answers it."""

LIFECYCLE: dict[str, Lifecycle] = {}
PREPARING: dict[str, Preparing] = {}
DISCARDING: dict[str, Discarding] = {}
CACHING: dict[str, Caching] = {}
VIEWERS: dict[str, Viewer] = {}
"""The surfaces that opted into an optional protocol (`surface.py`, `viewer.py`), by name, in
`SURFACES` order."""


def _claim(index: dict[str, Any], key: str, value: Any, name: str) -> None:
    if key in index:
        raise ValueError(f"{key!r} is claimed by two surfaces (the second is {name!r})")
    index[key] = value


def _index() -> None:
    """Rebuild the indexes in place (modules hold them by reference); a dataset type, scenario step
    or state field claimed by two surfaces is a programming error, raised here."""
    types: dict[str, Surface] = {}
    files: dict[str, str] = {}
    steps: dict[str, tuple[Surface, ScenarioStep]] = {}
    owners: dict[str, str] = {}
    for name, surface in SURFACES.items():
        if surface.name != name:
            raise ValueError(f"surface {surface.name!r} is registered as {name!r}")
        if surface.dataset_type is not None:
            _claim(types, surface.dataset_type, surface, name)
        if surface.dataset_files is not None:
            if surface.dataset_type is None:
                raise ValueError(f"surface {name!r} declares dataset_files but no dataset_type")
            _claim(files, surface.dataset_files, surface.dataset_type, name)
        for step, run in surface.scenario_steps.items():
            _claim(steps, step, (surface, run), name)
        for field in surface.state_fields:
            _claim(owners, field, name, name)
    live: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = (
        (DATASET_TYPES, types),
        (DATASET_FILES, files),
        (SCENARIO_STEPS, steps),
        (FIELD_OWNERS, owners),
        (LIFECYCLE, {n: s for n, s in SURFACES.items() if isinstance(s, Lifecycle)}),
        (PREPARING, {n: s for n, s in SURFACES.items() if isinstance(s, Preparing)}),
        (DISCARDING, {n: s for n, s in SURFACES.items() if isinstance(s, Discarding)}),
        (CACHING, {n: s for n, s in SURFACES.items() if isinstance(s, Caching)}),
        (VIEWERS, {n: s for n, s in SURFACES.items() if isinstance(s, Viewer)}),
    )
    for index, built in live:
        index.clear()
        index.update(built)
    use_surface_names(SURFACES)


def register(surface: Surface) -> None:
    """Add `surface` after the built-in ones; an app created afterwards mounts its routes."""
    if surface.name in SURFACES:
        raise ValueError(f"a surface named {surface.name!r} is already registered")
    SURFACES[surface.name] = surface
    try:
        _index()
    except ValueError:
        del SURFACES[surface.name]
        _index()
        raise


def unregister(name: str) -> None:
    SURFACES.pop(name, None)
    _index()


def surface_for_dataset(kind: str) -> Surface | None:
    return DATASET_TYPES.get(kind)


_index()
