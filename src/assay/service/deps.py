"""Dependency aliases, so handlers read like sentences (`session: SessionDep, caller: OrgCaller`).

Dependencies that do no I/O are `async` so they run on the event loop instead of taking a
threadpool hop each. The caller is resolved first, before any session exists (a refused request
never opens one): from the worker's run-token cache on the event loop, else with a short read on a
worker thread (`service/auth/cache.py`). A run's verbs are the exception
(`RunCallerInTransaction`): a token not cached is looked up in the verb's own transaction.
`SessionDep` is a `PendingSession` until the handler runs: `service/transactions.py::
TransactionRoute` opens the transaction on the handler's own thread and commits it when the
handler returns, before the response is sent, so a client never reads ahead of a commit and no
lock or connection is held across a thread hand-off.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Query, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.events import events_pending, flush_events
from assay.service.auth.cache import TokenCache
from assay.service.grading import Grading
from assay.service.limits import RateLimiter
from assay.service.settings import Settings
from assay.service.transactions import PendingSession, ResolvedInTransaction
from assay.store import Caller, Forbidden, RateLimited, clamp_limit

__all__ = [
    "AnyCaller",
    "GradingDep",
    "OrgCaller",
    "OrgCallerInTransaction",
    "PageDep",
    "PageQuery",
    "RunCaller",
    "RunCallerInTransaction",
    "RunCreator",
    "SandboxEventsFlushed",
    "SessionDep",
    "SettingsDep",
    "TaskRunEventsFlushed",
    "limit_rate",
    "public_host",
]


async def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def _session(request: Request) -> PendingSession:
    return PendingSession(request.app.state.database, _steps_before_transaction(request))


def _steps_before_transaction(request: Request) -> list[Callable[[], None]]:
    steps: list[Callable[[], None]] = request.scope.setdefault("assay.before_transaction", [])
    return steps


async def _grading(request: Request) -> Grading:
    grading: Grading = request.app.state.grading
    return grading


SessionDep = Annotated[Session, Depends(_session)]
"""A `Session` inside the handler; only routers with `route_class=TransactionRoute` take it."""
SettingsDep = Annotated[Settings, Depends(_settings)]
GradingDep = Annotated[Grading, Depends(_grading)]


async def _task_run_events_flushed(request: Request, task_run_id: str) -> None:
    engine = request.app.state.database.engine
    if events_pending(engine):  # nothing to do when nothing is queued
        _steps_before_transaction(request).append(
            functools.partial(flush_events, engine, task_run_id=task_run_id)
        )


async def _sandbox_events_flushed(request: Request, sandbox_id: str) -> None:
    engine = request.app.state.database.engine
    if events_pending(engine):
        _steps_before_transaction(request).append(
            functools.partial(flush_events, engine, sandbox_ids=(sandbox_id,))
        )


TaskRunEventsFlushed = Depends(_task_run_events_flushed)
"""Route dependency of a `SessionDep` handler: this worker's queued events of the task run's
sandboxes are written before the handler's transaction begins, on the handler's thread (its event
list, `complete`; `sandboxes/events.py`, `transactions.PendingSession.before`). Other runs' events
stay queued: under agent load, writing them first made `complete` wait for all traffic."""
SandboxEventsFlushed = Depends(_sandbox_events_flushed)
"""Route dependency of a `SessionDep` handler: this worker's queued events of the sandbox are
written first (its event list)."""


async def _caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> Caller:
    tokens: TokenCache = request.app.state.tokens
    caller = tokens.cached(authorization)
    if caller is None:
        caller = await run_in_threadpool(tokens.resolve, authorization)
    return limit_rate(request, caller)


def limit_rate(request: Request, caller: Caller) -> Caller:
    """Take one request from `caller`'s token bucket (docs/api.md, off unless `ASSAY_RATE_LIMIT`);
    429 `RATE_LIMITED` when it is empty. Every route that resolves a token calls it, the sandbox
    surfaces included."""
    limiter: RateLimiter | None = request.app.state.rate_limiter
    if limiter is not None:
        wait = limiter.acquire(caller.key_id or caller.benchmark_run_id or caller.org_id)
        if wait:
            raise RateLimited(wait)
    return caller


AnyCaller = Annotated[Caller, Depends(_caller)]


def _require(caller: Caller, *kinds: str) -> Caller:
    if caller.kind not in kinds:
        names = {"org": "an organization API key", "solver": "a Solver key", "run": "a run token"}
        allowed = " or ".join(names[kind] for kind in kinds)
        raise Forbidden(f"this endpoint needs {allowed}; {names[caller.kind]} may not call it")
    return caller


async def _org_caller(caller: AnyCaller) -> Caller:
    return _require(caller, "org")


async def _run_caller(caller: AnyCaller) -> Caller:
    return _require(caller, "run")


async def _run_creator(caller: AnyCaller) -> Caller:
    return _require(caller, "org", "solver")


OrgCaller = Annotated[Caller, Depends(_org_caller)]
RunCaller = Annotated[Caller, Depends(_run_caller)]
RunCreator = Annotated[Caller, Depends(_run_creator)]


@dataclass(frozen=True, slots=True)
class _CallerInTransaction(ResolvedInTransaction):
    """A token not in this worker's cache, looked up in the handler's transaction."""

    request: Request
    authorization: str | None
    kinds: tuple[str, ...]

    def resolve(self, session: Session) -> Caller:
        tokens: TokenCache = self.request.app.state.tokens
        return _require(limit_rate(self.request, tokens.resolve(self.authorization, session)), *self.kinds)


def _caller_in_transaction(*kinds: str) -> Callable[..., Any]:
    async def caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> Caller:
        tokens: TokenCache = request.app.state.tokens
        cached = tokens.cached(authorization)
        if cached is None:
            return _CallerInTransaction(request, authorization, kinds)  # type: ignore[return-value]
        return _require(limit_rate(request, cached), *kinds)

    return caller


RunCallerInTransaction = Annotated[Caller, Depends(_caller_in_transaction("run"))]
"""`RunCaller` for a run's verb (`complete`): a token this worker has not cached is looked up as
the first statement of the verb's own transaction, on its thread (`ResolvedInTransaction`), not in
a read of its own on another thread first. Under agent load each thread hand-off waits for the
busy event loop: the separate lookup cost a `complete` 9 ms at 16 clients on PostgreSQL
(`docs/decisions/load.md`). A refused token then costs a transaction, rolled back."""
OrgCallerInTransaction = Annotated[Caller, Depends(_caller_in_transaction("org"))]
"""`OrgCaller` for a run's verb (`rescore`), as `RunCallerInTransaction` (an API key is never cached)."""


@dataclass(frozen=True, slots=True)
class PageQuery:
    limit: int
    cursor: str | None


async def _page(
    limit: Annotated[str | None, Query(description="1..100, default 20")] = None,
    cursor: Annotated[str | None, Query(description="`_meta.next` or `_meta.prev` of a page")] = None,
) -> PageQuery:
    return PageQuery(clamp_limit(limit), cursor or None)


PageDep = Annotated[PageQuery, Depends(_page)]


def public_host(request: Request, settings: Settings) -> str:
    """`ASSAY_PUBLIC_HOST`, else the host the request was sent to (docs/api.md)."""
    if settings.public_host:
        return settings.public_host
    return request.url.hostname or "127.0.0.1"
