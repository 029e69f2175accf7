"""Playgrounds and their sandboxes: the seam between the run lifecycle and the sandbox surfaces.

Every surface implements `Surface` (`surface.py`) and is one line in `registry.SURFACES`; nothing
here names a surface. `provision` creates a task run's playground (one sandbox per
surface), `seed` loads its datasets and `run_scenario` its scenario steps, `describe` gives its
endpoints and credentials (docs/sandboxes.md), `capture` pins its final state when the task run ends,
`state_of` reads a capture as a `SandboxState`, and `materialize` writes it as a snapshot;
`purge_playgrounds` deletes the playgrounds of deleted runs with what their surfaces keep.
`listeners` runs the surfaces' servers (MLLP, SFTP) once per deployment; `lifetime` opens and
closes what surfaces keep while the app runs.
"""

from assay.sandboxes.capture import CapturedState, capture, materialize, state_of
from assay.sandboxes.datasets import (
    dataset_problems,
    is_prepared,
    prepare_datasets,
    prepared_types,
    remember_prepared,
    seed,
    unsupported_dataset,
)
from assay.sandboxes.events import record_event
from assay.sandboxes.lifetime import close_surfaces, open_surfaces
from assay.sandboxes.listeners import Listeners, has_listeners
from assay.sandboxes.provision import (
    describe,
    provision,
    purge_playgrounds,
    sandboxes_of,
    surface_endpoints,
    teardown,
)
from assay.sandboxes.registry import SURFACES
from assay.sandboxes.scenario import run_scenario, unsupported_step
from assay.sandboxes.settings import RunEnvironment, run_environment, unsupported_settings
from assay.sandboxes.surface import (
    Access,
    BaseSurface,
    CatchUp,
    Deployment,
    ProvisionFailed,
    RunContext,
    SandboxHandle,
    Surface,
    deployment_of,
    open_deployment,
)

__all__ = [
    "SURFACES",
    "Access",
    "BaseSurface",
    "CapturedState",
    "CatchUp",
    "Deployment",
    "Listeners",
    "ProvisionFailed",
    "RunContext",
    "RunEnvironment",
    "SandboxHandle",
    "Surface",
    "capture",
    "close_surfaces",
    "dataset_problems",
    "deployment_of",
    "describe",
    "has_listeners",
    "is_prepared",
    "materialize",
    "open_deployment",
    "open_surfaces",
    "prepare_datasets",
    "prepared_types",
    "provision",
    "purge_playgrounds",
    "record_event",
    "remember_prepared",
    "run_environment",
    "run_scenario",
    "sandboxes_of",
    "seed",
    "state_of",
    "surface_endpoints",
    "teardown",
    "unsupported_dataset",
    "unsupported_settings",
    "unsupported_step",
]
