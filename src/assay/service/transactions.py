"""A request's unit of work runs whole on the thread that does it.

The session dependency used to be a sync generator: FastAPI ran its set-up on one worker thread
(taking the SQLite write lock), the handler on another and the commit on a third, so the lock was
held across thread hand-offs. Once AnyIO's 40 threads were all waiting for that lock, the holder
never got a thread to finish on and the server froze for good (PostgreSQL ran out of pooled
connections the same way).

Now `SessionDep` resolves, on the event loop, to a `PendingSession`: a placeholder holding no
connection and no lock. Routers built with `route_class=TransactionRoute` wrap each sync handler
so that, on the one worker thread that runs it, the placeholder is swapped for a real session of
`Database.transaction()`, the handler runs, and the transaction commits (or rolls back) before the
thread is given back and before the response is sent. A thread holding the lock never waits for
another thread, so waiters always make progress; waits are bounded (`Busy` → 503).

Work a route needs done before its transaction, on no lock — writing the queued sandbox events
its handler will read (`deps.TaskRunEventsFlushed`) — is a step in `PendingSession.before`, run
on the handler's thread first. As a dependency of its own it cost a thread hand-off each way, and
under agent load each hand-off waits for the busy event loop: 12–27 ms of a `complete` measured
at 16 clients (`docs/performance.md`, "The agent path under load").

A route with a JSON body also reads a big one (`json_bodies.BIG_BODY` and up) before FastAPI does:
parsed and checked on a worker thread instead of the event loop (`json_bodies.read_big_body_first`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session

from assay.service.json_bodies import read_big_body_first
from assay.service.priority import VerbsFirst, is_served_first
from assay.store import Database

__all__ = ["PendingSession", "ResolvedInTransaction", "TransactionRoute", "in_one_transaction"]

_WRAPPED = "__assay_in_one_transaction__"


@dataclass(frozen=True, slots=True)
class PendingSession:
    """What `SessionDep` resolves to before the handler runs: which database, nothing opened."""

    database: Database
    before: list[Callable[[], None]] = field(default_factory=list)
    """Steps run on the handler's thread before the transaction opens (the request's own list:
    route dependencies add to it, whichever order FastAPI resolves them in)."""


class ResolvedInTransaction:
    """A dependency's value that is completed in the handler's transaction, on its thread, before
    the handler runs: the wrapper passes `resolve(session)` instead (`deps.RunCallerInTransaction`:
    a run token this worker has not seen, looked up without a thread hand-off of its own)."""

    def resolve(self, session: Session) -> Any:
        raise NotImplementedError


def in_one_transaction(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """`endpoint`, run inside one transaction when it takes a `PendingSession` (sync handlers only:
    an `async` handler has no thread of its own to hold the transaction on)."""
    if getattr(endpoint, _WRAPPED, False) or inspect.iscoroutinefunction(endpoint):
        return endpoint

    @functools.wraps(endpoint)
    def run(*args: Any, **kwargs: Any) -> Any:
        pending = [name for name, value in kwargs.items() if isinstance(value, PendingSession)]
        if not pending:
            return endpoint(*args, **kwargs)
        first: PendingSession = kwargs[pending[0]]
        for step in first.before:
            step()
        with first.database.transaction() as session:
            for name in pending:
                kwargs[name] = session
            for name, value in kwargs.items():
                if isinstance(value, ResolvedInTransaction):
                    kwargs[name] = value.resolve(session)
            return endpoint(*args, **kwargs)

    setattr(run, _WRAPPED, True)
    return run


def _counted_as_verb(
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    async def graded(request: Request) -> Response:
        gate: VerbsFirst | None = getattr(request.app.state, "verbs_first", None)
        if gate is None:
            return await handler(request)
        with gate.counted():
            return await handler(request)

    return graded


class TransactionRoute(APIRoute):
    """An `APIRoute` whose sync handler runs in one transaction on its own thread, whose big JSON
    body is read off the event loop, and which, for a `served_first` endpoint, holds this
    worker's agent requests back while it runs (`service/priority.py`)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any):
        super().__init__(path, in_one_transaction(endpoint), **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if is_served_first(self.endpoint):
            handler = _counted_as_verb(handler)
        if self.body_field is None:
            return handler

        async def big_body_read_first(request: Request) -> Response:
            return await read_big_body_first(request, handler)

        return big_body_read_first
