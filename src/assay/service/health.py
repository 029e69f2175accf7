"""`GET /healthz`: is this API up and can it reach its database? No token needed, so load balancers,
`assay demo` and the SDK's `health()` can ask before they have a key.

- 503 `SERVICE_UNAVAILABLE` (`details.dependency: "database"`) when a `SELECT 1` fails: the
  database is down, restarting or unreachable; requests that need it answer 503 too.
- 200 `{"status": "degraded", "problems": [...]}` when it answers but something is wrong that a
  load balancer cannot route around: the data dir's disk is full (a probe write of `PROBE_BYTES`
  fails with no space, or a write this process answered 507 found no space and less than 1 MiB
  was freed since: writes that need room answer 507, reads and deletes work), or this process
  dropped sandbox events during an outage (`events_lost`, counted since it started).
- 200 `{"status": "ok"}` otherwise.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from assay import __version__
from assay.sandboxes.events import events_lost
from assay.service.errors import ErrorEnvelope, envelope
from assay.store.faults import DATABASE, RETRY_AFTER, disk_full, no_space

__all__ = ["PROBE_BYTES", "router"]

router = APIRouter(tags=["health"])

PROBE_BYTES = 64 * 1024
"""Bytes the disk probe writes (and removes): room for a small write, the sidecar of a file tree."""


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    version: str
    problems: list[str] = []
    """Why it is `degraded`: `disk full: …`, `events lost: N …`."""
    events_lost: int = 0
    """Sandbox events this process dropped because the database was out and its queue full."""


@router.get(
    "/healthz",
    responses={
        200: {"model": HealthOut, "description": "Up, and the database answers (`degraded`: see `problems`)"},
        503: {
            "model": ErrorEnvelope,
            "description": "`SERVICE_UNAVAILABLE`: the database cannot be reached",
        },
    },
)
async def healthz(request: Request) -> Any:
    """`{"status": "ok" | "degraded", "version", "problems", "events_lost"}`; 503
    `SERVICE_UNAVAILABLE` when a `SELECT 1` on the database fails."""
    try:
        await run_in_threadpool(_ping, request)
    except SQLAlchemyError as exc:
        answer = envelope(
            503,
            "SERVICE_UNAVAILABLE",
            f"the database cannot be reached: {type(exc).__name__}",
            {"dependency": DATABASE, "retry_after": RETRY_AFTER},
        )
        answer.headers["Retry-After"] = str(RETRY_AFTER)
        return answer
    problems = []
    settings = getattr(request.app.state, "settings", None)
    data_dir = getattr(settings, "data_dir", None)
    if data_dir is not None:
        full = await run_in_threadpool(_disk_full, Path(data_dir))
        full = full or disk_full(Path(data_dir))
        if full:
            problems.append(f"disk full: {full}")
    lost = events_lost()
    if lost:
        problems.append(f"events lost: {lost} sandbox events dropped while the database was out")
    body: dict[str, Any] = {"status": "degraded" if problems else "ok", "version": __version__}
    if problems or lost:
        body.update(problems=problems, events_lost=lost)
    return JSONResponse(body)


def _ping(request: Request) -> None:
    with request.app.state.database.reading() as session:  # no write lock for a ping
        session.execute(text("SELECT 1"))


def _disk_full(data_dir: Path) -> str | None:
    """Why the data dir cannot take a small write (no space), or None. Any other failure (a data
    dir not made yet) is not this probe's to report."""
    probe = data_dir / f".assay-health-{uuid.uuid4().hex}"
    try:
        descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(descriptor, b"\0" * PROBE_BYTES)  # no fsync: the space is taken at the write
        finally:
            os.close(descriptor)
    except OSError as exc:
        return f"{data_dir}: {exc.strerror}" if no_space(exc) else None
    finally:
        probe.unlink(missing_ok=True)
    return None
