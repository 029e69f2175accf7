"""Sandbox settings of a task run, from its environment (`settings: {"fhir": {...}}`, SPEC §5.1).

The environment is the one a published run froze (its `BenchmarkVersion`) or, for a draft run,
the benchmark's current environment row, exactly as the datasets are chosen. Only FHIR reads a
setting so far: `fhir.strict_validation` (bool), which `ASSAY_FHIR_STRICT=1` turns on server-wide.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.orm import Session

from assay.sandboxes.fhir.strict import strict_available
from assay.store.models import Benchmark, BenchmarkRun, BenchmarkVersion, Environment, TaskRun

__all__ = ["environment_settings", "fhir_sandbox_settings", "run_environment", "unsupported_settings"]


def run_environment(session: Session, benchmark_run: BenchmarkRun) -> dict[str, Any]:
    """The environment a benchmark run uses, as `{dataset_ids, settings, ...}`; `{}` without one.

    A published run's is the one frozen with its `BenchmarkVersion`; a draft run's is the
    benchmark's current `Environment` row. The datasets (`service.sandboxes.datasets`) and the
    sandbox settings are chosen from this one answer.
    """
    if benchmark_run.version_id:
        version = session.get(BenchmarkVersion, benchmark_run.version_id)
        environment = ((version.frozen if version is not None else None) or {}).get("environment")
        return environment if isinstance(environment, dict) else {}
    benchmark = session.get(Benchmark, benchmark_run.benchmark_id)
    row = (
        session.get(Environment, benchmark.environment_id) if benchmark and benchmark.environment_id else None
    )
    return {"dataset_ids": row.dataset_ids, "settings": row.settings} if row is not None else {}


def environment_settings(session: Session, task_run: TaskRun) -> dict[str, Any]:
    """The `settings` object of the task run's environment; `{}` without one."""
    benchmark_run = session.get(BenchmarkRun, task_run.benchmark_run_id)
    if benchmark_run is None:
        return {}
    settings = run_environment(session, benchmark_run).get("settings")
    return settings if isinstance(settings, dict) else {}


def _strict_setting(settings: dict[str, Any]) -> Any:
    fhir = settings.get("fhir")
    return fhir.get("strict_validation", False) if isinstance(fhir, dict) else False


def _server_strict() -> bool:
    return os.environ.get("ASSAY_FHIR_STRICT", "").strip().lower() in ("1", "true", "yes")


def unsupported_settings(session: Session, task_run: TaskRun) -> str | None:
    """The reason `start` must fail for the environment's sandbox settings, or None."""
    strict = _strict_setting(environment_settings(session, task_run))
    if not isinstance(strict, bool):
        return f"settings.fhir.strict_validation must be true or false, got {strict!r}"
    if (strict or _server_strict()) and not strict_available():
        return (
            "settings.fhir.strict_validation needs the fhir.resources package, which is not installed "
            "(install assay[strict])"
        )
    return None


def fhir_sandbox_settings(session: Session, task_run: TaskRun) -> dict[str, Any] | None:
    """What the playground's `fhir` sandbox row keeps for its surface (`store.STRICT_KEY`)."""
    if _strict_setting(environment_settings(session, task_run)) is True or _server_strict():
        return {"strict_validation": True}
    return None
