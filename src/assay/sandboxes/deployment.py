"""One deployment's view of its surfaces (`Deployment`), and the one opened for each engine."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from assay.store.database import read_only

__all__ = ["Deployment", "deployment_of", "open_deployment"]


@dataclass(slots=True)
class Deployment:
    """One deployment's view of its surfaces: shared by the API workers' lifespan and the listener
    process. `ports` starts as the configured listener ports (`{"hl7": 2575, "files": 2222}`,
    0 = any free port) and holds the bound port once a listener is up, so credentials always report
    the port actually bound (docs/deployment.md)."""

    engine: Engine
    host: str = "127.0.0.1"
    """The interface listeners bind to (`assay serve --host`)."""
    data_dir: Path | None = None
    """The service's data directory (`--data-dir`); None: `ASSAY_DATA_DIR` or `.assay`."""
    ports: dict[str, int] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    """Each surface's settings section (`Surface.options`, every declared key, defaults filled
    in), by surface name: `service.settings.Settings.surface_options`."""
    runtime: dict[str, Any] = field(default_factory=dict)
    """Per-surface objects a surface keeps for the deployment's lifetime (clients, caches)."""
    _reader: Engine | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def read_engine(self) -> Engine:
        """`engine` for transactions that only read (`store.database.read_only`): on SQLite they
        take no turn in the process's write queue (docs/decisions/load.md, which transactions
        take a turn)."""
        if self._reader is None:  # two threads may both make one: either copy serves
            self._reader = read_only(self.engine)
        return self._reader

    def port(self, surface: str, default: int) -> int:
        return self.ports.get(surface, default)

    def option(self, surface: str, key: str, default: Any = None) -> Any:
        values = self.options.get(surface) or {}
        return values.get(key, default)


_DEPLOYMENTS: weakref.WeakKeyDictionary[Engine, Deployment] = weakref.WeakKeyDictionary()
_DEPLOYMENTS_LOCK = threading.Lock()


def open_deployment(deployment: Deployment) -> Deployment:
    """Make `deployment` the one of its engine, for code that reaches it through a session only
    (teardown from the sweeper and the lazy timeouts); the app's lifespan calls it."""
    with _DEPLOYMENTS_LOCK:
        _DEPLOYMENTS[deployment.engine] = deployment
    return deployment


def deployment_of(engine: Engine) -> Deployment:
    """The deployment opened for `engine`, or a default one (embedded stores, configured ports)."""
    with _DEPLOYMENTS_LOCK:
        found = _DEPLOYMENTS.get(engine)
        if found is None:
            found = _DEPLOYMENTS[engine] = Deployment(engine)
        return found
