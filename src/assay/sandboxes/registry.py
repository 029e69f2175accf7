"""Which surfaces exist: one line per surface, like `checks.CHECKS` (style.md, "A seam for sandboxes").

Adding a surface is a package under `sandboxes/` whose class implements `surface.Surface` (usually
by subclassing `BaseSurface`) and one line here. Everything else — dataset validation, `start`,
the routes, listeners, `complete`, the state tar.gz — loops over this mapping.
"""

from __future__ import annotations

from assay.sandboxes.fhir.surface import FhirSandbox
from assay.sandboxes.files.surface import FilesSandbox
from assay.sandboxes.hl7.surface import Hl7Sandbox
from assay.sandboxes.portal.surface import PortalSandbox
from assay.sandboxes.surface import ScenarioStep, Surface
from assay.sandboxes.voice.surface import VoiceSandbox
from assay.sandboxes.x12.surface import X12Sandbox

__all__ = ["DATASET_TYPES", "SCENARIO_STEPS", "SURFACES", "surface_for_dataset"]

SURFACES: dict[str, Surface] = {
    "fhir": FhirSandbox(),
    "hl7": Hl7Sandbox(),
    "x12": X12Sandbox(),
    "voice": VoiceSandbox(),
    "portal": PortalSandbox(),
    "files": FilesSandbox(),
}
"""Surface name (sandbox type, URL segment, snapshot folder) → surface; in provisioning order."""

DATASET_TYPES: dict[str, Surface] = {
    surface.dataset_type: surface for surface in SURFACES.values() if surface.dataset_type is not None
}
"""Dataset type (SPEC §5.1) → the surface that loads it."""

SCENARIO_STEPS: dict[str, tuple[Surface, ScenarioStep]] = {
    step: (surface, run) for surface in SURFACES.values() for step, run in surface.scenario_steps.items()
}
"""Scenario step name (SPEC §5.3) → (its surface, the step); a step no surface offers fails `start`."""


def surface_for_dataset(kind: str) -> Surface | None:
    return DATASET_TYPES.get(kind)
