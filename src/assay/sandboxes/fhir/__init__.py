"""The embedded FHIR R4 sandbox: versioned store per playground, dataset layers, REST surface.

SPEC §2 (what `fhir-resource-state` reads), §5.1 (dataset loading), §5.2 (the REST surface),
§6 (captures as a pointer: store id + sequence number).
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
