"""A run's verbs keep their pace while the agent path is busy: the GIL, shared sooner, and agent
requests held back while a worker runs a `start`, `complete` or `rescore`.

One worker is one process and one GIL. Under agent load the event loop (uvloop) holds the GIL
almost without pause: the fast path answers warm reads on it and never blocks. A `complete` runs
on a worker thread, and every SQLite statement it executes releases the GIL (the `sqlite3`
module drops it around each step) — after which the thread waits for the loop to give it back.
CPython makes a running thread give up the GIL only after `sys.getswitchinterval()`, 5 ms by
default, so a `complete` of a couple of dozen statements waited a couple of dozen times up to
5 ms: 125–150 ms p50 under 16 agent clients against ~10 ms of its own CPU.

`share_the_gil()` sets a shorter switch interval in each worker process: a waiting thread gets
the GIL within `SWITCH_INTERVAL`, and the loop gets it back as soon. It changes nothing while no
other thread wants the GIL. Measured on a quiet machine, 16 clients, one switch interval per run
(`docs/performance.md`, "The agent path under load"): `complete` p50 under load 125–149 ms at 5 ms → 84 ms at
1 ms → 58–60 ms at 0.1–0.5 ms; agent throughput within the run-to-run noise (3,970–4,650 req/s).

Sharing the GIL sooner was not enough on PostgreSQL with 2 workers: `complete` p50 under load
stayed 55–90 ms against ~8 ms of CPU. The same `complete`s sent to a second `assay serve` on the
same database, whose event loop had nothing else to do, took 26 ms with the machine as busy: the
cost was the worker's own event loop, which takes the GIL back every half millisecond and
interleaves each step of the `complete` request with the agent requests in line before it.

`VerbsFirst`: while a worker runs a run's verb (`start`, `complete`, `rescore`: endpoints marked
`served_first`), an agent's request to a surface or a tool arriving at that worker
(`fast_path.AssayApp`, any method) waits for the verbs to end, for at most `HOLD`; the loop idles
meanwhile, without the GIL. Requests already being answered go on, and so do the other workers.
A benchmark at scale is a closed loop — each agent sends its next request when the last is
answered — so on a saturated machine the wait is moved, not added: the two verbs of a task run go
first and its twenty-odd operations each wait a little longer. `HOLD` bounds what an agent
request can wait, however many verbs follow one another. Measured (`bench_load`, 16 clients,
`docs/performance.md`, "The agent path under load"): `complete` p50 under load 45–60 → 25–39 ms
on PostgreSQL, 28–30 → 15–21 ms on SQLite with reads held; at 20 ms the agent p99 on PostgreSQL
reached 52–57 ms twice when the machine was slow (target < 50); at 10 ms it stayed 20–28 ms.

`Admission`: a worker answers at most `ASSAY_AGENT_REQUESTS` (default 2) agent requests at once;
the next wait on the loop — costing no GIL — in arrival order, each for at most `ADMISSION_WAIT`,
then go ahead without a slot. With a dozen requests in flight per worker at 32 agents, a verb got
a twentieth of its worker's GIL; with two, the verbs' p50 halved at the same throughput
(docs/decisions/load.md, "`complete` under agent load").

Tried and not kept: the event loop sleeping 0.2–0.5 ms with the GIL released before each
fast-path answer while a grading ran (blocking the loop on purpose), and `time.sleep(0)` there
(the loop takes the GIL straight back): each within the noise of repeated runs. Holding the
worker threads' handlers too (a thread gate before their transaction) measured no better.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = [
    "ADMISSION_WAIT",
    "HOLD",
    "SWITCH_INTERVAL",
    "Admission",
    "VerbsFirst",
    "is_served_first",
    "served_first",
    "share_the_gil",
]

HOLD = 0.01
"""Seconds an agent request waits at most for its worker's run verbs to end."""

ADMISSION_WAIT = 0.25
"""Seconds an agent request waits at most for one of its worker's admission slots (`Admission`)."""

_MARK = "__assay_served_first__"
_F = TypeVar("_F", bound=Callable[..., Any])

SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits (CPython's default: 0.005)."""


def share_the_gil() -> None:
    """Set this process's switch interval to `SWITCH_INTERVAL` (once per worker, at startup)."""
    sys.setswitchinterval(SWITCH_INTERVAL)


def served_first(endpoint: _F) -> _F:
    """Mark a route's endpoint as a run's verb: while it runs, agent requests at its worker wait
    (`HOLD`)."""
    setattr(endpoint, _MARK, True)
    return endpoint


def is_served_first(endpoint: Callable[..., Any]) -> bool:
    return bool(getattr(endpoint, _MARK, False))


class Admission:
    """At most `limit` agent requests answered at once by one worker; the next wait their turn in
    arrival order, each for at most `ADMISSION_WAIT`, then go ahead without a slot (module
    docstring). `limit` 0: no limit. Used on the worker's event loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._answering = 0
        self._waiting: deque[asyncio.Future[bool]] = deque()

    @property
    def answering(self) -> int:
        """Requests holding a slot now."""
        return self._answering

    async def enter(self) -> bool:
        """Wait for a slot (at most `ADMISSION_WAIT`); whether one is held, to `leave` after."""
        if not self.limit:
            return False
        if self._answering < self.limit and not self._waiting:
            self._answering += 1
            return True
        turn: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        expiry = asyncio.get_running_loop().call_later(ADMISSION_WAIT, _expire, turn)
        try:
            return await turn  # True: a leaving request handed its slot over; False: waited out
        except asyncio.CancelledError:
            if _granted(turn):
                self.leave()  # handed a slot while being cancelled: pass it on
            raise
        finally:
            expiry.cancel()
            if not _granted(turn):
                with contextlib.suppress(ValueError):
                    self._waiting.remove(turn)

    def leave(self) -> None:
        """Give a held slot up: to the longest waiting request, else back."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(True)  # the slot goes straight to the longest waiting
                return
        self._answering -= 1


def _granted(turn: asyncio.Future[bool]) -> bool:
    return turn.done() and not turn.cancelled() and turn.result()


def _expire(turn: asyncio.Future[bool]) -> None:
    if not turn.done():
        turn.set_result(False)


class VerbsFirst:
    """One worker's run verbs in progress, and the turn agent requests wait for (module
    docstring). Used on the worker's event loop only."""

    def __init__(self, agent_requests: int = 0) -> None:
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.admission = Admission(agent_requests)

    @property
    def busy(self) -> bool:
        return self._running > 0

    @contextlib.contextmanager
    def counted(self) -> Iterator[None]:
        """A verb in progress for the block (a route handler, from its first step to its response)."""
        self._running += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def turn(self) -> None:
        """Return once no verb runs here, or after `HOLD` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), HOLD)
