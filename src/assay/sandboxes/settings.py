"""The environment a task run uses (docs/sandboxes.md): resolved once per `start` and passed down.

The environment is the one a published run froze (its `BenchmarkVersion`) or, for a draft run,
the benchmark's current environment row, exactly as the datasets are chosen. Its `settings`
(`{"fhir": {"strict_validation": true}}`) go to every surface's `check_settings` and `provision`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
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
    task_dataset_ids: tuple[tuple[str, ...], ...] = ()
    """A published run's tasks' own `dataset_ids`, each distinct list once (empty for a draft)."""


def run_environment(session: Session, benchmark_run: BenchmarkRun) -> RunEnvironment:
    """The environment a benchmark run uses (empty without one).

    A published run's is the one frozen with its `BenchmarkVersion` (with the frozen datasets);
    a draft run's is the benchmark's current `Environment` row. `start` reads it once and hands it
    down: the datasets (`service.sandboxes.datasets`) and the surfaces' settings come from it.
    """
    if benchmark_run.version_id:
        with _PUBLISHED_LOCK:
            known = _PUBLISHED.get(benchmark_run.version_id)
            if known is not None:
                _PUBLISHED.move_to_end(benchmark_run.version_id)
                return known
        version = session.get(BenchmarkVersion, benchmark_run.version_id)
        frozen = (version.frozen if version is not None else None) or {}
        environment = frozen.get("environment")
        environment = environment if isinstance(environment, dict) else {}
        found = RunEnvironment(
            list(environment.get("dataset_ids") or []),
            _settings(environment),
            frozen.get("datasets") or {},
            benchmark_run.version_id,
            _task_dataset_ids(frozen.get("tasks")),
        )
        # A version published before contents were stored apart holds them inline, and the
        # FHIR layer may rewrite a content in place: those are read anew for every start.
        inline = any(isinstance(d, dict) and "data" in d for d in (found.frozen_datasets or {}).values())
        if version is not None and not inline:
            with _PUBLISHED_LOCK:
                _PUBLISHED[benchmark_run.version_id] = found
                while len(_PUBLISHED) > _PUBLISHED_KEPT:
                    _PUBLISHED.popitem(last=False)
        return found
    benchmark = session.get(Benchmark, benchmark_run.benchmark_id)
    row = (
        session.get(Environment, benchmark.environment_id) if benchmark and benchmark.environment_id else None
    )
    if row is None:
        return RunEnvironment()
    return RunEnvironment(list(row.dataset_ids or []), _settings({"settings": row.settings}))


_PUBLISHED: OrderedDict[str, RunEnvironment] = OrderedDict()
"""Published versions' environments by version id: a version never changes once published, so
every `start` of its runs (and `prepare_start` before it) reads it once per process, not twice per
start. Callers only read it."""
_PUBLISHED_KEPT = 256
_PUBLISHED_LOCK = threading.Lock()


def _task_dataset_ids(tasks: Any) -> tuple[tuple[str, ...], ...]:
    lists: dict[tuple[str, ...], None] = {}
    for frozen in tasks if isinstance(tasks, list) else []:
        task = frozen.get("task") if isinstance(frozen, dict) else None
        named = task.get("dataset_ids") if isinstance(task, dict) else None
        lists[tuple(map(str, named or []))] = None
    return tuple(lists)


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
