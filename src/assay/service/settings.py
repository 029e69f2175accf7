"""Service settings, read once from the environment (docs/deployment.md) and passed to `create_app`.

Nothing below the service reads `ASSAY_*` at use time: the app's lifespan hands each surface its
part (`surface_options`) through the `Deployment`, so two apps in one process (tests, the demo)
may run with different settings."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.judge import JudgeSettings, voice_semantic_from_env
from assay.sandboxes import SURFACES
from assay.sandboxes.options import LISTENER_PORT, parse, read_section, resolve_section, variable_of
from assay.store import sqlite_url
from assay.store.tokens import ORG_KEY_PREFIX

__all__ = ["Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path = Path(".assay")
    database_url: str | None = None
    """`ASSAY_DATABASE_URL`; None means SQLite in `data_dir`."""
    bootstrap_api_key: str | None = None
    public_host: str | None = None
    """`ASSAY_PUBLIC_HOST`: the host put into credentials; default the request's host."""
    sweep_interval: float = 5.0
    """Seconds between sweeps for timed-out task runs and expired run tokens."""
    listen_host: str = "127.0.0.1"
    """The interface the surfaces' listeners bind to: `assay serve --host`."""
    worker_timeout: float = 10.0
    """`ASSAY_WORKER_TIMEOUT`: seconds a serving worker of `serve --workers N` may leave the
    supervisor's ping unanswered (frozen, its event loop wedged) before it is killed and replaced."""
    listeners: bool = True
    """`ASSAY_LISTENERS`: run the surfaces' listeners in this process (the app's lifespan). `serve
    --workers N` sets it to 0 in the workers: their listeners run once, in the listener process."""
    rate_limit: float | None = None
    """`ASSAY_RATE_LIMIT`: requests per second per token; None (the default) means no limit."""
    rate_limit_burst: int | None = None
    agent_requests: int = 2
    """`ASSAY_AGENT_REQUESTS`: agent requests (to a surface or a tool) one serving worker answers
    at once; the next wait their turn, each at most `priority.ADMISSION_WAIT`. 0: no limit."""
    max_body_bytes: int = 50 * 1024 * 1024
    """`ASSAY_MAX_BODY_BYTES`: largest request body (docs/api.md: a dataset body is at most 50 MB)."""
    voice_semantic: bool = False
    """`ASSAY_VOICE_SEMANTIC=1`: the semantic tier of `voice-transcript` for every criterion
    (needs the `semantic` extra; refused at start when it is missing)."""
    judge: JudgeSettings | None = None
    """`ASSAY_JUDGE_URL` (+ `_MODEL`, `_API_KEY`, `_TIMEOUT`): the LLM judge, or None."""
    surface_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """The surfaces' settings that are set, by surface name and option key: each registered
    surface's own section (`Surface.options`, `sandboxes/options.py`), read from the variable each
    option names (`ASSAY_<NAME>_<KEY>` unless it declares another, e.g. `ASSAY_MLLP_PORT`)."""

    def __post_init__(self) -> None:
        if self.agent_requests < 0:
            raise ValueError(f"ASSAY_AGENT_REQUESTS must be 0 (no limit) or more, not {self.agent_requests}")
        unknown = sorted(set(self.surface_settings) - set(SURFACES))
        if unknown:
            raise ValueError(f"settings for {', '.join(map(repr, unknown))}, which is not a surface")
        self.surface_options  # noqa: B018 - a value a surface refuses stops the start-up here

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or sqlite_url(self.data_dir)

    @property
    def listener_ports(self) -> dict[str, int]:
        """Surface name → the port its listener binds (0: any free port), docs/deployment.md."""
        options = self.surface_options
        return {
            name: int(options[name][LISTENER_PORT])
            for name, surface in SURFACES.items()
            if LISTENER_PORT in surface.options
        }

    @property
    def surface_options(self) -> dict[str, dict[str, Any]]:
        """What each surface reads through `Deployment.option(surface, key)`: every option it
        declares, set or default."""
        return {
            name: resolve_section(surface, self.surface_settings.get(name) or {})
            for name, surface in SURFACES.items()
        }

    def with_surface_settings(self, changes: Mapping[str, Mapping[str, Any]]) -> Settings:
        """These settings with `changes` (surface → option key → value) set over the current ones."""
        merged = {name: dict(section) for name, section in self.surface_settings.items()}
        for name, section in changes.items():
            merged.setdefault(name, {}).update(section)
        return dataclasses.replace(self, surface_settings=merged)

    def with_listener_ports(self, ports: Mapping[str, int]) -> Settings:
        """These settings with the listeners of `ports` (surface → port) bound there (a surface
        that declares no listener port is left out)."""
        declared = self.listener_ports
        return self.with_surface_settings(
            {name: {LISTENER_PORT: port} for name, port in ports.items() if name in declared}
        )

    def with_free_ports(self) -> Settings:
        """Every listener on a free port (tests, the demo, benchmarks)."""
        return self.with_listener_ports(dict.fromkeys(self.listener_ports, 0))

    def listener_port_variables(self) -> dict[str, str]:
        """The `ASSAY_*` variables of the listener ports, for a process that must bind (or name)
        the same ones (`serve --workers N`'s workers)."""
        return {
            variable_of(name, LISTENER_PORT, SURFACES[name].options[LISTENER_PORT]): str(port)
            for name, port in self.listener_ports.items()
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from `ASSAY_*` (unset or empty: the default); a variable that is set but is
        not a number (or a bootstrap key that is not a `vk_` key) is a `ValueError` naming it, not
        a traceback from the app's start-up."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {"data_dir": Path(env.get("ASSAY_DATA_DIR", ".assay"))}
        for field, kind in _FROM_ENV.items():
            name = "ASSAY_" + field.upper()
            raw = env.get(name)
            if raw:
                values[field] = parse(name, raw, kind)
        key = values.get("bootstrap_api_key")
        if key and not key.startswith(ORG_KEY_PREFIX):
            raise ValueError(f"ASSAY_BOOTSTRAP_API_KEY must be an org key starting with {ORG_KEY_PREFIX}")
        values["voice_semantic"] = voice_semantic_from_env(env)
        values["judge"] = JudgeSettings.from_env(env)
        values["surface_settings"] = _surface_settings(env)
        return cls(**values)


def _surface_settings(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each registered surface's declared options that `env` sets, parsed."""
    found = {name: read_section(surface, env) for name, surface in SURFACES.items()}
    return {name: section for name, section in found.items() if section}


_FROM_ENV: dict[str, type[Any]] = {
    "database_url": str,
    "bootstrap_api_key": str,
    "public_host": str,
    "sweep_interval": float,
    "rate_limit": float,
    "rate_limit_burst": int,
    "max_body_bytes": int,
    "agent_requests": int,
    "listen_host": str,
    "worker_timeout": float,
    "listeners": bool,
}
"""Each setting read from `ASSAY_<FIELD>`, with its type."""
