"""Playgrounds and their sandboxes: the seam between the run lifecycle and the sandbox stores.

`provision` creates a task run's playground (one sandbox per surface, SPEC §1), `describe` gives
its endpoints and credentials (SPEC §5.2), `capture` pins its final state when the task run ends,
`state_of` reads a capture as a `SandboxState`, and `materialize` writes it as a SPEC §6 snapshot.
`seed` loads the task run's datasets (FHIR so far) and `record_event` appends to the event log.
`unsupported_settings` is the reason an environment's sandbox settings cannot be honoured.
"""

from assay.sandboxes.capture import CapturedState, capture, materialize, state_of
from assay.sandboxes.datasets import seed, unsupported_dataset
from assay.sandboxes.events import record_event
from assay.sandboxes.provision import SURFACES, Access, describe, provision, surface_endpoints, teardown
from assay.sandboxes.settings import unsupported_settings

__all__ = [
    "SURFACES",
    "Access",
    "CapturedState",
    "capture",
    "describe",
    "materialize",
    "provision",
    "record_event",
    "seed",
    "state_of",
    "surface_endpoints",
    "teardown",
    "unsupported_dataset",
    "unsupported_settings",
]
