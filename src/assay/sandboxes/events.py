"""The sandbox event log (docs/api.md): every request to a surface, in order, bodies capped at 1 MiB.

`record_event` keeps its call signature but no longer writes on the caller's thread (every
agent request was a write transaction behind one lock, 16% of a FHIR read's server time). It
gives the event its id and time, puts it on this process's bounded queue and returns; one writer
thread per engine takes whatever has queued up and appends it in one transaction, each event
with the next per-sandbox `seq`, in the order they were queued. So:

- **No event lost.** The queue is bounded (`MAX_QUEUED`): a full queue makes `record_event` wait
  for room (`Busy` after `QUEUE_WAIT` seconds) instead of dropping anything; a batch that fails
  is retried one event at a time, and an event the database refuses is logged, not silently
  gone. Shutdown drains the queue (`close_event_logs`). A process killed with `-9` loses what
  it had queued and not written: at most the last few milliseconds of events (20 on SQLite,
  `_LINGER`; 50 on PostgreSQL, `_LINGER_POSTGRESQL`).
- **Through an outage.** A batch that fails because the database is unavailable
  (`store.faults.outage`: down, restarting, read-only, or a full disk) goes back to the head of
  the queue, and the writer tries again with growing pauses (`_RETRY_FIRST` to `_RETRY_MOST`
  seconds) until it is stored; a flush meanwhile raises `Unavailable` (503). While the database
  is out a full queue does not hold requests for `QUEUE_WAIT`: the event that finds no room is
  dropped and counted (`events_lost`, on `/healthz`; logged), and its sandbox's event list gets an
  `events_missing` event in its place, whose response is `{"missing": n}`, so a run's events say
  that some are missing rather than leave a silent gap.
- **Order kept.** One writer per process, first in first out; `seq`, `created_at` and `id` are
  assigned so that paging by (`created_at`, `id`) is `seq` order (`event_rows.listed_after`).
- **Or in the caller's transaction.** `write_event` appends in a transaction the caller already
  holds, for a protocol whose answer promises the interaction is stored (the MLLP listener: an
  `AA` goes back only once the message and its event are committed, one commit for both).
- **Flushed before anything reads it.** `flush_events(engine)` returns once every event queued
  before the call is committed, writing what is still queued on the caller's own thread (not
  waiting for the writer's): the event lists call it first. `complete` flushes only its own
  task run's events (`task_run_id`, which each queued event carries, so finding them costs no
  SQL): under agent load the queue holds other runs' events, and writing all of them first made
  every `complete` wait for everyone's traffic. Each
  sandbox's events are still written in the order they were queued (its `seq`). An event queued
  by another worker process is written by that worker's writer, after its linger (`_LINGER`).
  On SQLite the writer's transactions queue for the write lock in line with the requests'
  (`store/write_queue.py`), and a batch is one multi-row INSERT; on PostgreSQL one COPY,
  after two statements for all its sandboxes (`_last_events`).

Bodies are stored as JSON when they are JSON (so `GET /sandboxes/{id}/events` shows objects), as
text otherwise, when nested past `MAX_JSON_DEPTH`, or when not strict JSON (`store.json_values`: a
NaN or a lone surrogate stored as JSON made PostgreSQL refuse the row and the event list answer
500); past `MAX_BODY` bytes the text is cut and `truncated` is set. Parsing them is the writer's
work, off the request path. A NUL in the request path is written `\\x00` (PostgreSQL text holds
no NUL; the insert failed after the FHIR work was done).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict, Unpack

from sqlalchemy import Connection, Engine

from assay.store import Busy, new_id, utcnow
from assay.store.driver import DriverTransaction
from assay.store.errors import Unavailable
from assay.store.faults import DATABASE, no_space, outage
from assay.store.json_values import serialize_json

if TYPE_CHECKING:
    pass

from assay.sandboxes.event_rows import MAX_BODY, stored_body
from assay.sandboxes.event_rows import Queued as _Queued
from assay.sandboxes.event_rows import append as _append
from assay.sandboxes.event_rows import event_row as _row

__all__ = [
    "MAX_BODY",
    "Interaction",
    "close_event_logs",
    "events_lost",
    "events_pending",
    "flush_events",
    "has_room",
    "record_event",
    "stored_body",
    "write_event",
]

log = logging.getLogger("assay.sandboxes.events")

MAX_QUEUED = 10_000
"""Events one process holds before `record_event` waits for the writer."""
QUEUE_WAIT = 30.0
"""Seconds `record_event` waits for room in a full queue, and `flush_events` for the writer."""
_BATCH = 500
_BATCH_BYTES = 1024 * 1024
"""A batch ends at this many bytes of bodies too: the writer holds SQLite's write lock for a
whole batch, and under agent load 500 FHIR search answers (≈ 3 MB) kept a `complete` waiting
10–40 ms for it. Not much lower: at 128 KiB (23 answers a batch) PostgreSQL's writer, a few
round trips per batch, fell behind 1,500 requests/s per worker, the queue stayed over `_BATCH`
and each event then woke it — agent throughput with 2 workers 3,000–3,600 → 1,700–1,900/s."""
_LINGER = 0.02
"""Seconds a woken writer waits for more events before it writes a small batch (unless a flush
waits): one transaction per batch is the point, and each costs far more than the wait. Under 16
agent clients on SQLite a batch is about the events of one linger (~4,500 a second): at 5 ms,
~22 events a transaction, whose fixed cost (the write turn, `BEGIN IMMEDIATE`, the last-event
read, the statements' epoch tracking, the commit) was a measurable share of each event. Two
servers, 5 ms and 20 ms, measured in alternating slices on one machine (`bench/bench_ab.py`,
`complete`s running): 20 ms served 1–19 % more agent requests (six runs, median 11 %) at 2–18 %
less server CPU per request, `complete` p50 within a few milliseconds either way; 5 ms against
5 ms in the same set-up: equal. A `complete` waits for at most the batch being written (its own
task run's events it writes itself, `flush`)."""
_LINGER_POSTGRESQL = 0.05
"""At least this on PostgreSQL. Each batch there is a transaction of five statements,
and two workers' writers appending to the same sandboxes wait for each other's row lock; at 5 ms
a loaded worker wrote ~60 batches a second of ~35 events. Swapped A/B runs, 16 agent clients,
`complete`s running: 20 ms served 7–12 % more requests than 5 ms, 50 ms 5–8 % more than 20 ms,
with less CPU per request and faster `complete`s (27 against 35 ms). Events are flushed before
anything reads them, so the wait is seen only by a process killed with -9, which loses what it
had queued. SQLite stays below it: its writer holds the database's one write lock for a whole
batch, and a `complete` waits for it."""
_RETRY_FIRST = 0.1
_RETRY_MOST = 2.0
"""Seconds between the writer's attempts while the database is out: from the first to the most,
doubling. A PostgreSQL restart takes about a second, so the queue is stored soon after it."""
MISSING = "events_missing"
"""The type of the event that stands for events dropped while the database was out (module docstring)."""
_IDLE = 5.0
"""Seconds an idle writer thread waits for work before it exits (the next event starts one)."""


class Interaction(TypedDict):
    """One request to a surface as its event records it: the keywords of `record_event`,
    `write_event` and `SandboxHandle.record`."""

    method: str | None
    path: str | None
    status: int | None
    request: NotRequired[bytes]
    response: NotRequired[bytes]
    response_json: NotRequired[bool]
    """The response is strict JSON the server rendered itself (the FHIR surface's bodies), stored
    as the text it is without being parsed and checked again (queued events only)."""


def record_event(
    engine: Engine,
    *,
    org_id: str,
    sandbox_id: str,
    type: str,
    task_run_id: str | None = None,
    **interaction: Unpack[Interaction],
) -> str:
    """Queue one event for this process's writer; its id (the id it is stored under).

    `task_run_id`: the task run whose sandbox it is, for `flush_events(task_run_id=...)` (not
    stored: the sandbox says it); an event queued without one is flushed with every task run's."""
    event = _new(org_id, sandbox_id, type, interaction)
    event.task_run_id = task_run_id
    _log_of(engine).put(event)
    return event.id


def write_event(
    conn: Connection | DriverTransaction,
    *,
    org_id: str,
    sandbox_id: str,
    type: str,
    truncated: bool = False,
    **interaction: Unpack[Interaction],
) -> str:
    """Write one event in the caller's transaction, not through the queue; its id.

    For a protocol whose answer says the interaction is stored (an MLLP `AA`): the event commits
    with the data it describes, or neither does. `truncated` marks a request the caller already
    cut (an MLLP frame over 1 MB keeps only its first MiB)."""
    event = _new(org_id, sandbox_id, type, interaction)
    row = _row(event, passthrough=False)
    row["truncated"] = row["truncated"] or truncated
    _append(conn, [row])
    return event.id


def has_room(engine: Engine) -> bool:
    """Whether this process's queue is far from full (`record_event` will not wait for room)."""
    found = _LOGS.get(engine)
    return found is None or len(found._queue) < MAX_QUEUED // 2


def flush_events(
    engine: Engine,
    timeout: float = QUEUE_WAIT,
    sandbox_ids: Collection[str] | None = None,
    task_run_id: str | None = None,
) -> None:
    """Return once every event this process queued before the call (of `sandbox_ids` only, or
    of `task_run_id`'s sandboxes only, when given) is in the database, writing what is still
    queued on the caller's thread."""
    found = _LOGS.get(engine)
    if found is not None:
        selection = None
        if sandbox_ids is not None or task_run_id is not None:
            selection = _Wanted(None if sandbox_ids is None else frozenset(sandbox_ids), task_run_id)
        found.flush(timeout, selection)


def events_pending(engine: Engine) -> bool:
    """Whether this process has queued events not yet written (a flush would have work to do)."""
    found = _LOGS.get(engine)
    return found is not None and found.pending()


def events_lost() -> int:
    """Events this process dropped since it started because the database was out and its queue full."""
    return sum(found.lost for found in list(_LOGS.values()))


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What a flush is for: the events of `sandbox_ids`, or of `task_run_id`'s sandboxes (and
    those of any sandbox with an event queued without a task run, which may be its)."""

    sandbox_ids: frozenset[str] | None = None
    task_run_id: str | None = None

    def sandboxes(self, queued: Iterable[_Queued]) -> frozenset[str]:
        """The sandboxes of `queued` to write. Whole sandboxes: each sandbox's events are
        written in the order they were queued (its `seq`), so a flush never writes one ahead of
        an earlier one left queued."""
        return frozenset(
            event.sandbox_id
            for event in queued
            if (self.sandbox_ids is not None and event.sandbox_id in self.sandbox_ids)
            or (self.task_run_id is not None and event.task_run_id in (self.task_run_id, None))
        )


def close_event_logs(engine: Engine, timeout: float = QUEUE_WAIT) -> None:
    """Drain and stop this process's writer for `engine` (at shutdown, before the engine goes)."""
    found = _LOGS.pop(engine, None)
    if found is not None:
        try:
            found.flush(timeout)
        except (Unavailable, Busy):
            log.error(
                "%d sandbox events could not be stored before shutdown: the database is unavailable",
                len(found._queue) + len(found._in_flight),
            )


class _EventLog:
    """One engine's queue and writer thread in this process.

    Events are taken off the queue and written only under `_writing`, a batch at a time, so they
    reach the database in the order they were queued whoever writes them: the writer thread, or a
    flush that writes what is still queued itself (below)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._queue: deque[_Queued] = deque()
        self._cond = threading.Condition()
        self._writing = threading.Lock()
        self._queued = 0  # tickets handed out
        self._in_flight: list[_Queued] = []  # the batch being written (under `_writing`)
        self._writer: threading.Thread | None = None
        self._idle = False  # the writer waits for work (rather than lingering over a small batch)
        self._passthrough = getattr(engine.dialect, "_json_serializer", None) is serialize_json
        self._postgresql = engine.dialect.name == "postgresql"
        self._out: str | None = None
        """Why the last write failed while the database is unavailable; None once one works."""
        self._missing: dict[str, _Queued] = {}
        """The queued `events_missing` event of each sandbox that lost events, still counting."""
        self.lost = 0
        """Events dropped because the database was out and the queue full (`events_lost`)."""

    def put(self, event: _Queued) -> None:
        with self._cond:
            if len(self._queue) >= MAX_QUEUED and self._out is not None:
                self._drop(event)
                return
            if len(self._queue) >= MAX_QUEUED and not self._cond.wait_for(
                lambda: len(self._queue) < MAX_QUEUED, QUEUE_WAIT
            ):
                raise Busy("the sandbox event log is behind", retry_after=1)
            self._queued += 1
            event.ticket = self._queued
            self._queue.append(event)
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name="assay-event-log", daemon=True)
                self._writer.start()
            elif self._idle or len(self._queue) >= _BATCH:
                # A lingering writer is not woken for each event (a thread switch per request).
                self._cond.notify_all()

    def _drop(self, event: _Queued) -> None:
        """Count `event` as lost (the database is out, the queue full): its sandbox's
        `events_missing` event, queued past the bound (one per sandbox), says how many. Holding `_cond`."""
        self.lost += 1
        if self.lost == 1 or self.lost % 1000 == 0:
            log.error(
                "sandbox events dropped: the database is unavailable (%s) and %d events are queued; "
                "%d dropped so far", self._out, len(self._queue), self.lost,
            )  # fmt: skip
        marker = self._missing.get(event.sandbox_id)
        if marker is None:
            marker = _new(
                event.org_id, event.sandbox_id, MISSING, {"method": None, "path": None, "status": None}
            )
            marker.task_run_id = event.task_run_id
            self._queued += 1
            marker.ticket = self._queued
            self._missing[event.sandbox_id] = marker
            self._queue.append(marker)
        marker.missing += 1

    def pending(self) -> bool:
        return bool(self._queue or self._in_flight)

    def flush(self, timeout: float, selection: _Wanted | None = None) -> None:
        """Write, on the caller's thread, whatever of the events queued before the call is not
        written yet (waiting for the writer thread instead meant a hand-off each way,
        each a wait for the GIL behind the busy event loop; and a flush cut the writer's linger
        short, so under load it wrote batch after tiny batch).

        `selection`: only those sandboxes' events (and whatever batch is being written, which
        may hold some of them); the others stay queued for the writer, in their order."""
        with self._cond:
            target = self._queued
            queued = (*self._in_flight, *self._queue)
            wanted = None if selection is None else selection.sandboxes(queued)
            if not queued or wanted == frozenset():
                return
        if not self._writing.acquire(timeout=timeout):  # the writer thread is writing a batch
            raise Busy("the sandbox event log is behind", retry_after=1)
        try:
            while self._write_next(target, wanted):
                pass
        finally:
            self._writing.release()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._idle = True
                found = self._cond.wait_for(lambda: bool(self._queue), _IDLE)
                self._idle = False
                if not found:
                    self._writer = None  # the next `put` starts a new writer
                    return
                linger = max(_LINGER, _LINGER_POSTGRESQL) if self._postgresql else _LINGER
                self._cond.wait_for(lambda: len(self._queue) >= _BATCH, linger)
            with self._writing:
                try:
                    self._write_next(None)
                    continue
                except Unavailable:
                    pass
            self._wait_out()

    def _wait_out(self) -> None:
        """The writer's pause after a write failed because the database is out: growing while it
        stays out, cut short by nothing (a flush tries on its own thread meanwhile)."""
        pause = _RETRY_FIRST
        while True:
            with self._cond:
                if self._out is None:
                    return
                self._cond.wait(pause)
            with self._writing:
                try:
                    self._write_next(None)
                    return
                except Unavailable:
                    pause = min(pause * 2, _RETRY_MOST)

    def _write_next(self, upto: int | None, wanted: frozenset[str] | None = None) -> bool:
        """Take the next batch (of tickets up to `upto`, when given; of the `wanted` sandboxes,
        when given) off the queue and write it; False when there was nothing to take. Call it
        holding `_writing`."""
        with self._cond:
            batch: list[_Queued] = []
            size = 0
            if wanted is None:
                while self._queue and len(batch) < _BATCH and size < _BATCH_BYTES:
                    if upto is not None and self._queue[0].ticket > upto:
                        break
                    batch.append(event := self._queue.popleft())
                    size += len(event.request) + len(event.response)
            else:
                kept: deque[_Queued] = deque()
                for event in self._queue:
                    if (
                        len(batch) < _BATCH
                        and size < _BATCH_BYTES
                        and event.sandbox_id in wanted
                        and (upto is None or event.ticket <= upto)
                    ):
                        batch.append(event)
                        size += len(event.request) + len(event.response)
                    else:
                        kept.append(event)
                self._queue = kept
            if not batch:
                return False
            for event in batch:  # counted no further: a drop from now on starts a new one
                if event.type == MISSING and self._missing.get(event.sandbox_id) is event:
                    del self._missing[event.sandbox_id]
            self._in_flight = batch
            self._cond.notify_all()  # room for waiting producers
        unwritten: list[_Queued] = []
        try:
            unwritten = self._write(batch)
        finally:
            with self._cond:
                self._in_flight = []
                if unwritten:  # back at the head, in their order: tried again once the database is back
                    self._queue.extendleft(reversed(unwritten))
                self._cond.notify_all()
        if unwritten:
            raise Unavailable(DATABASE, message=f"the database is unavailable ({self._out}); retry")
        if self._out is not None:
            log.warning("sandbox events are stored again: the database is back")
            self._out = None
        return True

    def _write(self, batch: list[_Queued]) -> list[_Queued]:
        """Store `batch`; the events not stored because the database is out (the rest of the
        batch from the first such failure), which the caller queues again."""
        try:
            with self.engine.begin() as conn:
                _append(conn, [_row(event, self._passthrough) for event in batch])
            return []
        except Exception as exc:
            if self._unavailable(exc):
                return batch
            if len(batch) == 1:
                log.exception("sandbox event %s could not be stored", batch[0].id)
                return []
            log.warning("a batch of %d sandbox events failed; storing them one by one", len(batch))
        for index, event in enumerate(batch):
            try:
                with self.engine.begin() as conn:
                    _append(conn, [_row(event, self._passthrough)])
            except Exception as exc:
                if self._unavailable(exc):
                    return batch[index:]
                log.exception("sandbox event %s could not be stored", event.id)
        return []

    def _unavailable(self, exc: Exception) -> bool:
        """Whether `exc` is the database out (or its disk full): the events are kept, not dropped."""
        if not (outage(exc) or no_space(exc)):
            return False
        if self._out is None:
            log.warning("sandbox events are kept queued until the database is back: %s", exc)
        self._out = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return True


def _new(org_id: str, sandbox_id: str, type: str, interaction: Interaction) -> _Queued:
    """The event with its id and time, given now: its place in line (docs/api.md)."""
    path = interaction["path"]
    return _Queued(
        new_id("evt_"), utcnow(), org_id, sandbox_id, type, interaction["method"],
        None if path is None else path.replace("\x00", "\\x00"), interaction["status"],
        bytes(interaction.get("request", b"")), bytes(interaction.get("response", b"")),
        interaction.get("response_json", False),
    )  # fmt: skip


_LOGS: weakref.WeakKeyDictionary[Engine, _EventLog] = weakref.WeakKeyDictionary()
_LOGS_LOCK = threading.Lock()


def _log_of(engine: Engine) -> _EventLog:
    found = _LOGS.get(engine)
    if found is None:
        with _LOGS_LOCK:
            found = _LOGS.get(engine)
            if found is None:
                found = _LOGS[engine] = _EventLog(engine)
    return found
