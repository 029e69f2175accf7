"""The embedded FHIR R4 sandbox: versioned store per playground, dataset layers, REST surface.

What `fhir-resource-state` reads, dataset loading and the REST surface: docs/sandboxes.md;
captures as a pointer (store id + sequence number): docs/snapshots.md.
"""

from __future__ import annotations

from assay.sandboxes.fhir.outcomes import FhirError, operation_outcome
from assay.sandboxes.fhir.routes import FHIR_JSON, FhirSurface, SurfaceEvent, base_url_of, fhir_router
from assay.sandboxes.fhir.store import EmbeddedFhir

__all__ = [
    "FHIR_JSON",
    "EmbeddedFhir",
    "FhirError",
    "FhirSurface",
    "SurfaceEvent",
    "base_url_of",
    "fhir_router",
    "operation_outcome",
]
