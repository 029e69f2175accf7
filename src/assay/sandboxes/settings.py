"""The environment a task run uses (docs/sandboxes.md): resolved once per `start` and passed down.

The environment is the one a published run froze (its `BenchmarkVersion`) or, for a draft run,
the benchmark's current environment row, exactly as the datasets are chosen. Its `settings`
(`{"fhir": {"strict_validation": true}}`) go to every surface's `check_settings` and `provision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from assay.sandboxes.registry import PREPARING
from assay.sandboxes.surface import Deployment
from assay.store.models import Benchmark, BenchmarkRun, BenchmarkVersion, Environment

__all__ = ["RunEnvironment", "run_environment", "unsupported_settings"]


@dataclass(frozen=True, slots=True)
class RunEnvironment:
    """What a benchmark run's environment says, read once per `start`."""

    dataset_ids: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    """`settings` of docs/sandboxes.md (`{"fhir": {"strict_validation": true}}`)."""
    frozen_datasets: dict[str, Any] | None = None
    """A published run's datasets by id as frozen at publish (id, type, content hash; the content
    in `BenchmarkVersionDataset`, or inline as `data` for versions published before it); None for
    a draft run."""
    version_id: str | None = None
    """A published run's `BenchmarkVersion`."""


def run_environment(session: Session, benchmark_run: BenchmarkRun) -> RunEnvironment:
    """The environment a benchmark run uses (empty without one).

    A published run's is the one frozen with its `BenchmarkVersion` (with the frozen datasets);
    a draft run's is the benchmark's current `Environment` row. `start` reads it once and hands it
    down: the datasets (`service.sandboxes.datasets`) and the surfaces' settings come from it.
    """
    if benchmark_run.version_id:
        version = session.get(BenchmarkVersion, benchmark_run.version_id)
        frozen = (version.frozen if version is not None else None) or {}
        environment = frozen.get("environment")
        environment = environment if isinstance(environment, dict) else {}
        return RunEnvironment(
            list(environment.get("dataset_ids") or []),
            _settings(environment),
            frozen.get("datasets") or {},
            benchmark_run.version_id,
        )
    benchmark = session.get(Benchmark, benchmark_run.benchmark_id)
    row = (
        session.get(Environment, benchmark.environment_id) if benchmark and benchmark.environment_id else None
    )
    if row is None:
        return RunEnvironment()
    return RunEnvironment(list(row.dataset_ids or []), _settings({"settings": row.settings}))


def _settings(environment: Mapping[str, Any]) -> dict[str, Any]:
    settings = environment.get("settings")
    return settings if isinstance(settings, dict) else {}


def unsupported_settings(settings: Mapping[str, Any], deployment: Deployment) -> str | None:
    """The reason `start` must fail for the environment's sandbox settings, or None."""
    for surface in PREPARING.values():
        problem = surface.check_settings(settings, deployment)
        if problem:
            return problem
    return None
