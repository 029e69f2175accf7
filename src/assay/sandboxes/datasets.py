"""Datasets into a playground (docs/sandboxes.md): validated at create by their surface, loaded at `start`.

Each dataset type is loaded by the surface that declares it (`Surface.dataset_type`); a task run
whose datasets include a type no live surface loads cannot be provisioned faithfully, so `start`
fails it with the reason (docs/api.md: `dataset type voice is not supported`) instead of running on
partial state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from assay.sandboxes.provision import sandboxes_of
from assay.sandboxes.registry import DATASET_TYPES, PREPARING, SURFACES
from assay.sandboxes.surface import Deployment, RunContext
from assay.store.models import Sandbox

__all__ = [
    "dataset_problems",
    "is_prepared",
    "prepare_datasets",
    "prepared_types",
    "remember_prepared",
    "seed",
    "unsupported_dataset",
]


def dataset_problems(kind: str, data: Any) -> dict[str, list[str]] | None:
    """The surface's 422 details for `data` (`{"data.<key.path>": [message]}`), `{}` when it is
    valid, or None when no live surface loads `kind`."""
    surface = DATASET_TYPES.get(kind)
    return None if surface is None else surface.validate_dataset(data)


def unsupported_dataset(datasets: Sequence[Mapping[str, Any]]) -> str | None:
    """The reason `start` must fail for these datasets, or None when all can be loaded."""
    for dataset in datasets:
        kind = dataset.get("type")
        if kind not in DATASET_TYPES:
            return f"dataset type {kind} is not supported"
    return None


def seed(
    run: RunContext, datasets: Sequence[Mapping[str, Any]], sandboxes: Sequence[Sandbox] | None = None
) -> None:
    """Hand each surface its datasets, in load order (every surface is called, with none too: it
    creates its store); inside the caller's transaction. `sandboxes`: the playground's rows, when
    the caller holds them (`Provisioned`)."""
    rows = {sandbox.type: sandbox for sandbox in sandboxes_of(run.session, run.playground_id, sandboxes)}
    for name, surface in SURFACES.items():
        mine = [dataset for dataset in datasets if dataset.get("type") == surface.dataset_type]
        surface.seed(run, rows[name], mine)


def prepared_types() -> frozenset[str]:
    """The dataset types whose surfaces build something before `start`'s transaction (`Preparing`)."""
    return frozenset(t for name in PREPARING if (t := SURFACES[name].dataset_type) is not None)


def prepare_datasets(datasets: Sequence[Mapping[str, Any]], deployment: Deployment) -> None:
    """Before `start`'s transaction, with no lock held: each surface with datasets builds what its
    `seed` will find ready (the FHIR dataset layer), so the transaction that follows stays short
    and other requests do not wait behind a big load."""
    for name, surface in PREPARING.items():
        mine = [dataset for dataset in datasets if dataset.get("type") == SURFACES[name].dataset_type]
        if mine:
            surface.prepare(mine, deployment)


_PREPARED: OrderedDict[str, None] = OrderedDict()
"""The benchmark runs whose every start finds in this worker what the `Preparing` surfaces built
for it (`remember_prepared`), oldest first, at most `_PREPARED_KEPT`."""
_PREPARED_KEPT = 4096
_PREPARED_LOCK = threading.Lock()


def remember_prepared(benchmark_run_id: str) -> None:
    """Every task of this run seeds the datasets `prepare_datasets` has just prepared here."""
    with _PREPARED_LOCK:
        _PREPARED[benchmark_run_id] = None
        while len(_PREPARED) > _PREPARED_KEPT:
            _PREPARED.popitem(last=False)


def is_prepared(benchmark_run_id: str | None) -> bool:
    with _PREPARED_LOCK:
        return benchmark_run_id in _PREPARED
