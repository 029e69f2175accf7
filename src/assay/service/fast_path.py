"""The agent path below FastAPI: warm run-token sandbox reads answered before routing.

A run-token FHIR search through FastAPI cost about nine times a bare hello-world of the same
stack, and most of that was not FHIR work: route matching over every route, dependency solving
(pydantic validation of the path, query and `Authorization` parameters), and the middleware
layers each wrapping `send` (`docs/performance.md`, "The agent path under load"). `AssayApp` looks at a
request before all of that: a `GET /v1/task-runs/{id}/<surface>/…` whose run token and task-run rows this
worker already holds (`TokenCache.cached`, `SandboxRows.get`: the same caches, and the same
change epoch, the dependencies use on the event loop) is handed to the surface's `serve_cached`,
which answers it from memory or declines. Anything else — an unknown or expired token, a task
run whose surfaces take no traffic, a rate limit configured, a request the surface does not
serve this way — goes through FastAPI exactly as before, which answers it (and its errors) the
usual way; nothing is recorded by a request the fast path declined. The routes stay the
documented surface (OpenAPI); the fast path only answers sooner what they would answer.

**Catching up once.** A committed change to a task run's rows or FHIR store moves its slot of
the change epoch (any unscoped change, all of them: `store/epoch.py`), so after a `complete` (or
a write) of that task run its cached rows and index are stale at once, and each of the requests
in flight for it used to decline to the routes and read SQL on a thread of its own. Now the first
request that finds the task-run rows (or the surface's state, `CatchUp`) stale reads them on a
worker thread, the others in flight for the same rows wait for that one read (`_Flights`), and
all are then answered here. A read that fails sends its requests to the routes, which answer it.
Rows found stale are re-read and the surface's state brought current (`Surface.catch_up`) in one
hand-off: every commit makes both stale at once, and two hand-offs one after the other kept all
of a worker's agent requests waiting twice as long after each `complete`.

A request to any surface path (`/v1/task-runs/{id}/<surface>/…`, `/v1/benchmark-runs/{id}/<surface>/…`,
any method) names here, first, the change epoch's key it reads for: the run in its path
(`reads_of`). On PostgreSQL the epoch costs a round trip (`store/epoch.py`, `PostgresEpoch`): it
is read here, once, on the event loop — before anything is looked up — and the caches, here and
in the routes, use that reading for the rest of the request.

**A run's verbs first.** While this worker runs a `start`, `complete` or `rescore`, an agent's
request to a surface or a tool (any method) waits for it to end (at most `priority.HOLD`) before
it is looked at: the loop idles instead of taking the GIL from the verb every half millisecond
(`service/priority.py`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, TypeVar

from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from assay.sandboxes import SURFACES, CatchUp
from assay.sandboxes.registry import CACHING
from assay.service.auth.cache import TokenCache
from assay.service.priority import Admission, VerbsFirst
from assay.service.sandboxes.routes import cached_handle, load_rows
from assay.store import DomainError
from assay.store.epoch import ChangeEpoch, reads_of

__all__ = ["AssayApp", "serve_cached"]

_AGENT_GET = re.compile(r"/v1/task-runs/([^/]+)/([a-z0-9]+)(/.*)")
_SURFACE_PATH = re.compile(r"/v1/(?:task|benchmark)-runs/([^/]+)/([a-z0-9]+)(?:/.*)?")


_T = TypeVar("_T")


async def _admitted(admission: Admission | None, answer: Coroutine[Any, Any, _T]) -> _T:
    """`answer` awaited in one of `admission`'s slots (when it has one free in time)."""
    try:
        held = admission is not None and await admission.enter()
    except BaseException:
        answer.close()  # cancelled while waiting: never started
        raise
    try:
        return await answer
    finally:
        if held:
            assert admission is not None
            admission.leave()


def _is_agent_request(path: str) -> bool:
    """Whether `path` is an agent's request to a surface or a tool of a run (not a run's verb)."""
    found = _SURFACE_PATH.fullmatch(path)
    return found is not None and (found.group(2) in SURFACES or found.group(2) == "tools")


class _Flights:
    """One worker-thread run per key at a time: later callers for the same key wait for it."""

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Future[Any]] = {}

    async def run(self, key: Hashable, work: Callable[[], Any]) -> None:
        found = self._running.get(key)
        if found is None:
            found = asyncio.ensure_future(run_in_threadpool(work))
            self._running[key] = found
            found.add_done_callback(lambda _: self._running.pop(key, None))
        await asyncio.shield(found)  # a caller that goes away leaves the run to the others


async def serve_cached(app: FastAPI, scope: dict[str, Any]) -> Response | None:
    """The answer to a warm run-token surface read, or None for FastAPI to answer."""
    found = _AGENT_GET.fullmatch(scope["path"])
    if found is None or scope.get("root_path"):
        return None
    task_run_id, name, relative = found.groups()
    surface = CACHING.get(name)
    state = app.state
    if surface is None or getattr(state, "rate_limiter", None) is not None:
        return None
    request = Request(scope)
    tokens: TokenCache = state.tokens
    flights: _Flights | None = getattr(state, "fast_path_flights", None)
    if flights is None:
        flights = state.fast_path_flights = _Flights()
    try:
        caller = tokens.cached(request.headers.get("authorization"))
        if caller is None or caller.kind != "run":
            return None
        handle = cached_handle(request, caller, task_run_id, name)
        if handle is None:
            key, load = load_rows(request, caller, task_run_id, name)

            def load_and_catch_up() -> None:  # one hand-off for both (module docstring)
                load()
                loaded = cached_handle(request, caller, task_run_id, name)
                if loaded is not None:
                    surface.catch_up(loaded)

            await flights.run(key, load_and_catch_up)
            handle = cached_handle(request, caller, task_run_id, name)
            if handle is None:
                return None
        try:
            return surface.serve_cached(request, handle, relative)
        except CatchUp as behind:
            await flights.run(behind.key, behind.run)
        return surface.serve_cached(request, handle, relative)
    except (DomainError, CatchUp):  # an expired token or an ended task run (the routes' 401 or 409),
        return None  # or still behind after catching up once: the routes answer


class AssayApp(FastAPI):
    """FastAPI, with warm run-token surface reads answered before routing (module docstring),
    and agent tool calls (`POST /v1/task-runs/{id}/tools/{name}`) answered before the middleware
    stack by the handler `install_tools` sets as `state.tool_calls` (`service/tools/routes.py`)."""

    async def routed(self, scope: Any, receive: Any, send: Any) -> None:
        """The app without the paths answered before routing: what they answer, the routes do."""
        await super().__call__(scope, receive, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        gate: VerbsFirst | None = getattr(self.state, "verbs_first", None)
        if gate is None or not _is_agent_request(scope["path"]):
            await self._answer(scope, receive, send, None)
            return
        if gate.busy:
            await gate.turn()  # this worker's `start` or `complete` goes first (service/priority.py)
        await self._answer(scope, receive, send, gate.admission)

    async def _answer(self, scope: Any, receive: Any, send: Any, admission: Admission | None) -> None:
        """Answer a tool call, a warm read, or through the routes. Tool calls and routed agent
        requests take one of `admission`'s slots (service/priority.py); a warm read, answered on
        the loop with no thread, does not: on PostgreSQL it awaits the change epoch's round trip,
        which a slot would keep other reads from overlapping."""
        if scope["method"] == "POST":
            tool_calls = getattr(self.state, "tool_calls", None)  # service/tools/routes.py
            if tool_calls is not None and await _admitted(admission, tool_calls(scope, receive, send)):
                return
        response = await self.answer_early(scope)
        if response is not None:
            await response(scope, receive, send)
            return
        await _admitted(admission, super().__call__(scope, receive, send))

    async def answer_early(self, scope: Any) -> Response | None:
        """The answer to a warm run-token surface read, or None for the routes (which then find
        the change epoch read: PostgreSQL). A tool's own request comes here first too."""
        found = _SURFACE_PATH.fullmatch(scope["path"])
        if found is not None and found.group(2) in SURFACES:
            # The run named by the path: the change epoch's key this request reads for.
            reads_of(found.group(1))
            epoch: ChangeEpoch | None = getattr(self.state, "epoch", None)
            if epoch is not None and epoch.remote:
                await epoch.snapshot()  # never raises: a failed read is no snapshot (SQL then)
        if scope["method"] != "GET":
            return None
        try:
            return await serve_cached(self, scope)
        except Exception:  # nothing recorded yet (the event is the last step): the routes
            return None  # answer it, and their error handlers shape and log a failure
