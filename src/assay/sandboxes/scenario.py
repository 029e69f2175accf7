"""Scenario steps (docs/sandboxes.md): a task's `scenario: [{step, ...}]`, run at `start` in order.

Each surface contributes its steps (`Surface.scenario_steps`, gathered in `registry.SCENARIO_STEPS`).
A step no live surface offers fails the start (409, task run `failed`) rather than being skipped:
a skipped step would leave the agent a different world than the task describes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.sandboxes.provision import sandboxes_of
from assay.sandboxes.registry import SCENARIO_STEPS
from assay.sandboxes.surface import RunContext
from assay.store.models import Sandbox

__all__ = ["run_scenario", "unsupported_step"]


def unsupported_step(scenario: Sequence[Any] | None) -> str | None:
    """The reason `start` must fail for this scenario before anything is provisioned, or None."""
    for step in scenario or []:
        name = step.get("step") if isinstance(step, dict) else None
        if name not in SCENARIO_STEPS:
            return f"scenario step {name!r} is not supported"
    return None


def run_scenario(
    run: RunContext, scenario: Sequence[Mapping[str, Any]] | None, sandboxes: Sequence[Sandbox] | None = None
) -> None:
    """Run each step against its surface's sandbox; `ProvisionFailed` names the failing step.
    `sandboxes`: the playground's rows, when the caller holds them (`Provisioned`)."""
    if not scenario:
        return
    rows = {sandbox.type: sandbox for sandbox in sandboxes_of(run.session, run.playground_id, sandboxes)}
    for step in scenario:
        surface, handler = SCENARIO_STEPS[str(step["step"])]
        handler(run, rows[surface.name], step)
