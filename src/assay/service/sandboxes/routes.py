"""The sandbox surfaces of a started task run, under its run token (docs/api.md).

Each registered surface's router is mounted twice: `/v1/task-runs/{id}/<name>/...` reaches that
task run's sandbox; `/v1/benchmark-runs/{id}/<name>/...` reaches the single started task run of the
benchmark run (409 listing the started ids when none or several are). Once the task run has ended —
or its deadline passed — every surface answers 409, so the captured state is final (docs/api.md).

Resolving a request needs no SQL and no thread hand-off when nothing changed: the run
token comes from the worker's cache (`service/auth/cache.py`), and the task run's state and its
sandbox row from the worker's `SandboxRows`, on the event loop. The rows are what one read-only
unit of work read (`actions.read_rows`: no write lock, no `BEGIN IMMEDIATE`, only the columns the
check needs), kept while the change epoch for their run is the one read before them
(`store/epoch.py`): a committed change to that task run — its `complete`, a write through its
surfaces — or an unscoped one — a cancel, the sweeper's timeout — moves it, and the next request
reads them again on a worker thread; another task run's writes leave them current. The dependency
scopes the request's own writes to its task run and benchmark run (`scope_writes`). The checks
themselves (state, deadline against the clock) run on every request. The stores take their own
locks for writes, and re-check that the playground is still active under them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from starlette.concurrency import run_in_threadpool

from assay.sandboxes import SURFACES, Deployment, SandboxHandle
from assay.sandboxes.surface import SurfaceTarget
from assay.service.auth.cache import TokenCache
from assay.service.deps import limit_rate
from assay.service.limits import storable_parameters
from assay.service.runs import states
from assay.service.sandboxes import actions
from assay.store import Caller, Conflict, Database, Forbidden, NotFound, utcnow
from assay.store.epoch import ChangeEpoch, epoch_of, scope_writes

__all__ = [
    "SandboxRows",
    "benchmark_run_target",
    "cached_handle",
    "epoch_key",
    "load_rows",
    "sandbox_routers",
    "task_run_target",
]

MAX_ENTRIES = 10_000

_Key = tuple[str | None, str | None, str | None, str]
"""(org, benchmark run, task run or None for "the started one", surface)."""


class SandboxRows:
    """Per worker: the rows `actions.read_rows` read for a caller's task run (or benchmark run)
    and surface, each kept with the change epoch for that run (`epoch_key`) read before it was
    read; used only while that epoch is current. Without an epoch (`current()` None: PostgreSQL outside a request that read it, or
    when reading it failed) nothing is used or kept and the request reads."""

    def __init__(self, epoch: ChangeEpoch, max_entries: int = MAX_ENTRIES):
        self.epoch = epoch
        self.max_entries = max_entries
        self._entries: OrderedDict[_Key, tuple[bytes, list[Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Key) -> list[Any] | None:
        stamp = self.epoch.current(epoch_key(key))
        found = self._entries.get(key) if stamp is not None else None
        return found[1] if found is not None and found[0] == stamp else None

    def load(self, key: _Key, read: Callable[[], list[Any]]) -> list[Any]:
        """`read()` now, remembered under the epoch read before it (on the calling thread)."""
        stamp = self.epoch.current(epoch_key(key))
        rows = read()
        if stamp is not None:
            with self._lock:
                self._entries[key] = (stamp, rows)
                self._entries.move_to_end(key)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        return rows


def epoch_key(key: _Key) -> str | None:
    """The change epoch's key an entry is read for: its task run's, or for "the started one" its
    benchmark run's (every start and end in the run moves that one)."""
    return key[2] or key[1]


def sandbox_rows(request: Request) -> SandboxRows:
    """The app's `SandboxRows`, made on first use from its database's epoch."""
    state = request.app.state
    found: SandboxRows | None = getattr(state, "sandbox_rows", None)
    if found is None:
        database: Database = state.database
        found = state.sandbox_rows = SandboxRows(epoch_of(database.engine))
    return found


async def _run_caller(request: Request, authorization: str | None) -> Caller:
    # A NUL in the run's id: 400 on both backends, not PostgreSQL's DataError; the surfaces' own
    # parameters are theirs to judge (the FHIR store holds a NUL in an id as JSON text).
    storable_parameters(request, "task_run_id", "benchmark_run_id")
    tokens: TokenCache = request.app.state.tokens
    caller = tokens.cached(authorization)
    if caller is None:
        caller = await run_in_threadpool(tokens.resolve, authorization)
    caller = limit_rate(request, caller)
    if caller.kind != "run":
        raise Forbidden("sandbox surfaces need the run token of the benchmark run")
    return caller


def _open(deployment: Deployment, row: Any, surface: str) -> SandboxHandle:
    """The `surface` sandbox of a task run whose surfaces take traffic, else 409."""
    if not states.is_running((row.phase, row.status)):
        raise Conflict(f"task run {row.id} is {row.phase}/{row.status}: its surfaces take no traffic")
    if row.deadline_at is not None and row.deadline_at <= utcnow():
        raise Conflict(f"task run {row.id} passed its deadline: its surfaces take no traffic")
    if row.playground_id is None or row.sandbox_id is None:
        raise Conflict(f"task run {row.id} has no {surface} sandbox")
    return SandboxHandle(
        deployment, row.org_id, row.id, row.playground_id, row.sandbox_id, row.credentials or {}
    )


async def _cached_rows(request: Request, caller: Caller, surface: str, task_run_id: str | None) -> list[Any]:
    """`_rows` for the caller: from the worker's `SandboxRows` on the event loop when nothing has
    changed since they were read, else read on a worker thread."""
    cache = sandbox_rows(request)
    key = (caller.org_id, caller.benchmark_run_id, task_run_id, surface)
    rows = cache.get(key)
    if rows is None:
        database: Database = request.app.state.database
        rows = await run_in_threadpool(
            cache.load, key, lambda: actions.read_rows(database, caller, surface, task_run_id)
        )
    return rows


def _task_run_sandbox(
    deployment: Deployment, rows: list[Any], task_run_id: str, surface: str
) -> SandboxHandle:
    if not rows:
        raise NotFound.of("task run", task_run_id)
    return _open(deployment, rows[0], surface)


def _started_sandbox(
    deployment: Deployment, rows: list[Any], benchmark_run_id: str, surface: str
) -> SandboxHandle:
    started = [row for row in rows if states.is_running((row.phase, row.status))]
    if len(started) != 1:
        ids = [row.id for row in started]
        which = ", ".join(ids) if ids else "none"
        raise Conflict(
            f"benchmark run {benchmark_run_id} needs exactly one started task run for this "
            f"surface; started: {which}",
            {"started_task_run_ids": ids},
        )
    return _open(deployment, started[0], surface)


def cached_handle(request: Request, caller: Caller, task_run_id: str, surface: str) -> SandboxHandle | None:
    """What `task_run_target` resolves to, from the worker's `SandboxRows` alone (no SQL, no thread);
    None when they hold nothing current for it. `Conflict` as the dependency raises it."""
    rows = sandbox_rows(request).get((caller.org_id, caller.benchmark_run_id, task_run_id, surface))
    if not rows:
        return None
    return _open(request.app.state.deployment, rows[0], surface)


def load_rows(
    request: Request, caller: Caller, task_run_id: str, surface: str
) -> tuple[Hashable, Callable[[], list[Any]]]:
    """(key, blocking read) that brings the worker's `SandboxRows` entry for this task run and
    surface current: for the fast path to run once on a worker thread for every request that
    found it stale."""
    cache = sandbox_rows(request)
    key = (caller.org_id, caller.benchmark_run_id, task_run_id, surface)
    database: Database = request.app.state.database
    return ("rows", *key), lambda: cache.load(
        key, lambda: actions.read_rows(database, caller, surface, task_run_id)
    )


def task_run_target(surface: str) -> SurfaceTarget:
    """The dependency that resolves `/v1/task-runs/{task_run_id}/<surface>` to its sandbox."""

    async def target(
        request: Request, task_run_id: str, authorization: Annotated[str | None, Header()] = None
    ) -> SandboxHandle:
        caller = await _run_caller(request, authorization)
        rows = await _cached_rows(request, caller, surface, task_run_id)
        handle = _task_run_sandbox(request.app.state.deployment, rows, task_run_id, surface)
        scope_writes(handle.task_run_id, caller.benchmark_run_id)  # `store/epoch.py`
        return handle

    return target


def benchmark_run_target(surface: str) -> SurfaceTarget:
    """The dependency that resolves `/v1/benchmark-runs/{id}/<surface>` to the single started task
    run's sandbox."""

    async def target(
        request: Request, benchmark_run_id: str, authorization: Annotated[str | None, Header()] = None
    ) -> SandboxHandle:
        caller = await _run_caller(request, authorization)
        if caller.benchmark_run_id != benchmark_run_id:
            raise NotFound.of("benchmark run", benchmark_run_id)
        rows = await _cached_rows(request, caller, surface, None)
        handle = _started_sandbox(request.app.state.deployment, rows, benchmark_run_id, surface)
        scope_writes(handle.task_run_id, caller.benchmark_run_id)  # `store/epoch.py`
        return handle

    return target


def sandbox_routers() -> list[tuple[APIRouter, str]]:
    """(router, prefix) pairs the app mounts: two per surface that has routes."""
    mounted: list[tuple[APIRouter, str]] = []
    for name, surface in SURFACES.items():
        for target, prefix in (
            (task_run_target(name), f"/v1/task-runs/{{task_run_id}}/{name}"),
            (benchmark_run_target(name), f"/v1/benchmark-runs/{{benchmark_run_id}}/{name}"),
        ):
            router = surface.router(target)
            if router is not None:
                mounted.append((router, prefix))
    return mounted
