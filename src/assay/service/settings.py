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
from assay.sandboxes.fhir.external import ISOLATIONS, ExternalFhirSettings
from assay.store import sqlite_url
from assay.store.tokens import ORG_KEY_PREFIX

__all__ = ["LISTENER_PORTS", "Settings"]


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
    sftp_port: int = 2222
    mllp_port: int = 2575
    listen_host: str = "127.0.0.1"
    """The interface the surfaces' listeners (MLLP, SFTP) bind to: `assay serve --host`."""
    worker_timeout: float = 10.0
    """`ASSAY_WORKER_TIMEOUT`: seconds a serving worker of `serve --workers N` may leave the
    supervisor's ping unanswered (frozen, its event loop wedged) before it is killed and replaced."""
    mllp_idle_timeout: float = 300.0
    """`ASSAY_MLLP_IDLE_TIMEOUT`: seconds an MLLP connection may stay silent before it is closed."""
    mllp_frame_timeout: float = 60.0
    """`ASSAY_MLLP_FRAME_TIMEOUT`: seconds an MLLP frame may take from its first byte to its end."""
    mllp_max_connections_per_source: int = 64
    """`ASSAY_MLLP_MAX_CONNECTIONS_PER_SOURCE`: MLLP connections one address holds at once (0: no cap)."""
    sftp_max_auth_tries: int = 6
    """`ASSAY_SFTP_MAX_AUTH_TRIES`: wrong passwords one SSH connection may send before it is closed."""
    sftp_auth_backoff: float = 0.5
    """`ASSAY_SFTP_AUTH_BACKOFF`: seconds the first wrong password from an address waits for its
    answer; each further one from there doubles it (up to `ASSAY_SFTP_AUTH_BACKOFF_MAX`)."""
    sftp_auth_backoff_max: float = 10.0
    """`ASSAY_SFTP_AUTH_BACKOFF_MAX`: the longest wait for a wrong password's answer."""
    listeners: bool = True
    """`ASSAY_LISTENERS`: run the surfaces' listeners in this process (the app's lifespan). `serve
    --workers N` sets it to 0 in the workers: their listeners run once, in the listener process."""
    rate_limit: float | None = None
    """`ASSAY_RATE_LIMIT`: requests per second per token; None (the default) means no limit."""
    rate_limit_burst: int | None = None
    max_body_bytes: int = 50 * 1024 * 1024
    """`ASSAY_MAX_BODY_BYTES`: largest request body (docs/api.md: a dataset body is at most 50 MB)."""
    voice_semantic: bool = False
    """`ASSAY_VOICE_SEMANTIC=1`: the semantic tier of `voice-transcript` for every criterion
    (needs the `semantic` extra; refused at start when it is missing)."""
    judge: JudgeSettings | None = None
    """`ASSAY_JUDGE_URL` (+ `_MODEL`, `_API_KEY`, `_TIMEOUT`): the LLM judge, or None."""
    sim: JudgeSettings | None = None
    """`ASSAY_SIM_URL` (+ `_MODEL`, `_API_KEY`, `_TIMEOUT`): the OpenAI-compatible model that
    voices the phone line's personas that ask for it (`llm: true`), or None."""
    storage_url: str | None = None
    """`ASSAY_STORAGE_URL`: where playground files live (`s3://`, `gs://`, `file://`); None: the data dir."""
    storage_options: str | None = None
    """`ASSAY_STORAGE_OPTIONS`: a JSON object of fsspec filesystem options (an S3 `endpoint_url`)."""
    max_file_bytes: int = 25 * 1024 * 1024
    """`ASSAY_MAX_FILE_BYTES`: largest file an agent may upload or a dataset may hold (docs/api.md)."""
    fhir_url: str | None = None
    """`ASSAY_FHIR_URL`: an external FHIR R4 server the FHIR surface forwards to; None: embedded."""
    fhir_isolation: str = "tag"
    """`ASSAY_FHIR_ISOLATION`: how playgrounds are kept apart on that server (`external.ISOLATIONS`)."""
    fhir_authorization: str | None = None
    """`ASSAY_FHIR_AUTHORIZATION`: the `Authorization` header Assay sends that server."""
    fhir_lenient: bool = False
    """`ASSAY_FHIR_LENIENT=1`: agent FHIR writes get the structural checks only (recorded at `start`)."""
    fhir_strict: bool = False
    """`ASSAY_FHIR_STRICT=1`: a `start` whose environment turns validation off still
    fails when fhir.resources is missing."""
    portal_sign_in_free_failures: int = 5
    """`ASSAY_PORTAL_SIGN_IN_FREE_FAILURES`: wrong web-portal passwords a source or session makes
    before each further one makes it wait (`sandboxes/portal/throttle.py`)."""
    portal_sign_in_backoff: float = 1.0
    """`ASSAY_PORTAL_SIGN_IN_BACKOFF`: seconds of that first wait, doubling with each failure."""
    portal_sign_in_backoff_max: float = 60.0
    """`ASSAY_PORTAL_SIGN_IN_BACKOFF_MAX`: the longest wait, in seconds."""
    surface_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Each surface's own settings section (`Surface.options`): `ASSAY_<NAME>_<KEY>`, by surface
    name and option key; merged into `surface_options`."""

    def __post_init__(self) -> None:
        for field in ("portal_sign_in_free_failures", "portal_sign_in_backoff", "portal_sign_in_backoff_max"):
            if getattr(self, field) < 0:
                raise ValueError(f"ASSAY_{field.upper()} must not be negative, got {getattr(self, field)}")
        if self.fhir_isolation not in ISOLATIONS:
            raise ValueError(
                f"ASSAY_FHIR_ISOLATION must be one of {', '.join(ISOLATIONS)}, got {self.fhir_isolation!r}"
            )

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or sqlite_url(self.data_dir)

    @property
    def listener_ports(self) -> dict[str, int]:
        """Surface name → the port its listener binds (0: any free port), docs/deployment.md."""
        return {surface: getattr(self, field) for surface, field in LISTENER_PORTS.items()}

    @property
    def external_fhir(self) -> ExternalFhirSettings | None:
        """The external FHIR server's settings, or None for the embedded store."""
        url = (self.fhir_url or "").strip().rstrip("/")
        return ExternalFhirSettings(url, self.fhir_isolation, self.fhir_authorization) if url else None

    @property
    def surface_options(self) -> dict[str, dict[str, Any]]:
        """What each surface reads through `Deployment.option(surface, key)`."""
        options = self._built_in_options()
        for name, section in self.surface_settings.items():
            options[name] = {**options.get(name, {}), **section}
        return options

    def _built_in_options(self) -> dict[str, dict[str, Any]]:
        return {
            "fhir": {
                "external": self.external_fhir,
                "lenient": self.fhir_lenient,
                "strict": self.fhir_strict,
            },
            "hl7": {
                "idle_timeout": self.mllp_idle_timeout,
                "frame_timeout": self.mllp_frame_timeout,
                "max_per_source": self.mllp_max_connections_per_source,
            },
            "voice": {"sim": self.sim},
            "portal": {
                "sign_in_free_failures": self.portal_sign_in_free_failures,
                "sign_in_backoff": self.portal_sign_in_backoff,
                "sign_in_backoff_max": self.portal_sign_in_backoff_max,
            },
            "files": {
                "data_dir": str(self.data_dir.resolve()),
                "storage_url": self.storage_url,
                "storage_options": self.storage_options,
                "max_file_bytes": self.max_file_bytes,
                "max_auth_tries": self.sftp_max_auth_tries,
                "auth_backoff": self.sftp_auth_backoff,
                "auth_backoff_max": self.sftp_auth_backoff_max,
            },
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
                values[field] = _parse(name, raw, kind)
        key = values.get("bootstrap_api_key")
        if key and not key.startswith(ORG_KEY_PREFIX):
            raise ValueError(f"ASSAY_BOOTSTRAP_API_KEY must be an org key starting with {ORG_KEY_PREFIX}")
        values["voice_semantic"] = voice_semantic_from_env(env)
        values["judge"] = JudgeSettings.from_env(env)
        values["sim"] = _sim_from_env(env)
        values["surface_settings"] = _surface_settings(env)
        return cls(**values)


def _surface_settings(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each registered surface's declared options that are set, `ASSAY_<NAME>_<KEY>`, parsed."""
    found: dict[str, dict[str, Any]] = {}
    for name, surface in SURFACES.items():
        for key, kind in surface.options.items():
            variable = f"ASSAY_{name}_{key}".upper()
            raw = env.get(variable)
            if raw:
                found.setdefault(name, {})[key] = _parse(variable, raw, kind)
    return found


def _sim_from_env(env: Mapping[str, str]) -> JudgeSettings | None:
    """`ASSAY_SIM_*`, read as the judge's variables are (the same client speaks to both)."""
    renamed = {
        key.replace("ASSAY_SIM_", "ASSAY_JUDGE_"): value
        for key, value in env.items()
        if key.startswith("ASSAY_SIM_")
    }
    try:
        return JudgeSettings.from_env(renamed)
    except ValueError as exc:
        raise ValueError(str(exc).replace("ASSAY_JUDGE_", "ASSAY_SIM_")) from None


LISTENER_PORTS = {"hl7": "mllp_port", "files": "sftp_port"}
"""Surface name → the `Settings` field (and `ASSAY_<FIELD>` variable) of its listener's port."""

_FROM_ENV: dict[str, type[Any]] = {
    "database_url": str,
    "bootstrap_api_key": str,
    "public_host": str,
    "sweep_interval": float,
    "sftp_port": int,
    "mllp_port": int,
    "rate_limit": float,
    "rate_limit_burst": int,
    "max_body_bytes": int,
    "storage_url": str,
    "storage_options": str,
    "max_file_bytes": int,
    "listen_host": str,
    "mllp_idle_timeout": float,
    "mllp_frame_timeout": float,
    "mllp_max_connections_per_source": int,
    "sftp_max_auth_tries": int,
    "sftp_auth_backoff": float,
    "sftp_auth_backoff_max": float,
    "worker_timeout": float,
    "listeners": bool,
    "fhir_url": str,
    "fhir_isolation": str,
    "fhir_authorization": str,
    "fhir_lenient": bool,
    "fhir_strict": bool,
    "portal_sign_in_free_failures": int,
    "portal_sign_in_backoff": float,
    "portal_sign_in_backoff_max": float,
}
"""Each setting read from `ASSAY_<FIELD>`, with its type."""


def _parse(name: str, raw: str, kind: type[Any]) -> Any:
    if kind is bool:
        if raw.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if raw.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name} must be 1 or 0, got {raw!r}")
    try:
        return kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {what}, got {raw!r}") from None
