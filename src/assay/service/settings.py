"""Service settings, read once from the environment (SPEC §7) and passed to `create_app`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from assay.store import sqlite_url

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
    sftp_port: int = 2222
    mllp_port: int = 2575
    rate_limit: float | None = None
    """`ASSAY_RATE_LIMIT`: requests per second per token; None (the default) means no limit."""
    rate_limit_burst: int | None = None
    max_body_bytes: int = 50 * 1024 * 1024
    """`ASSAY_MAX_BODY_BYTES`: largest request body (SPEC §5.1: a dataset body is at most 50 MB)."""

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or sqlite_url(self.data_dir)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        env = os.environ if environ is None else environ
        settings = cls(
            data_dir=Path(env.get("ASSAY_DATA_DIR", ".assay")),
            database_url=env.get("ASSAY_DATABASE_URL") or None,
            bootstrap_api_key=env.get("ASSAY_BOOTSTRAP_API_KEY") or None,
            public_host=env.get("ASSAY_PUBLIC_HOST") or None,
            sweep_interval=float(env.get("ASSAY_SWEEP_INTERVAL", "5")),
            sftp_port=int(env.get("ASSAY_SFTP_PORT", "2222")),
            mllp_port=int(env.get("ASSAY_MLLP_PORT", "2575")),
            rate_limit=float(env["ASSAY_RATE_LIMIT"]) if env.get("ASSAY_RATE_LIMIT") else None,
            rate_limit_burst=int(env["ASSAY_RATE_LIMIT_BURST"])
            if env.get("ASSAY_RATE_LIMIT_BURST")
            else None,
        )
        return replace(settings, **overrides)
