"""Playgrounds and their sandboxes: the seam between the run lifecycle and the sandbox stores.

`provision` creates a task run's playground (one sandbox per surface, SPEC §1), `describe` gives
its endpoints and credentials (SPEC §5.2), `capture` pins its final state when the task run ends,
`state_of` reads a capture as a `SandboxState`, and `materialize` writes it as a SPEC §6 snapshot.
Until the sandbox surfaces exist the stores are empty, and a capture is a pointer to nothing.
"""

from assay.sandboxes.capture import CapturedState, capture, materialize, state_of
from assay.sandboxes.provision import SURFACES, Access, describe, provision, teardown

__all__ = [
    "SURFACES",
    "Access",
    "CapturedState",
    "capture",
    "describe",
    "materialize",
    "provision",
    "state_of",
    "teardown",
]
