"""A task run's trajectory: the agent's messages (posted by its harness) and the tool calls the
service executed for it, stored in `trajectory_steps` and exported as OpenAI chat messages.

**Steps.** A harness posts `{"steps": [{role, content, tool_calls?, tool_call_id?, name?}, …]}`
(`POST /v1/task-runs/{id}/trajectory`): OpenAI Chat Completions messages, the interchange most
harnesses already keep (Inspect, τ²-bench and MedAgentBench logs convert to it). Each tool call
through `/tools/{name}` or MCP is stored by the service as a step of its own (`source` `tool`).

**Caps.** A step is at most `MAX_STEP_BYTES` of JSON, a post at most `MAX_STEPS_PER_POST` steps,
a task run at most `MAX_STEPS` posted steps; past them the post is refused whole (413 or 422),
nothing half-written. A tool step keeps its arguments and result up to `MAX_STEP_BYTES` (cut and
marked `truncated` beyond).

**Writes.** A tool step is queued and written by this process's writer thread, off the tool
call's path (the same reason as the event log: a write per agent request was a large share of
it); the export writes what is still queued first.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from assay.store import Database, Invalid, new_id, utcnow
from assay.store.errors import PayloadTooLarge
from assay.store.json_values import JsonText, json_bytes
from assay.store.models import TrajectoryStep

__all__ = [
    "MAX_STEPS",
    "MAX_STEPS_PER_POST",
    "MAX_STEP_BYTES",
    "TrajectoryLog",
    "append_steps",
    "export",
    "validate_steps",
]

log = logging.getLogger("assay.service.tools")

MAX_STEP_BYTES = 64 * 1024
MAX_STEPS_PER_POST = 200
MAX_STEPS = 5000
ROLES = ("system", "user", "assistant", "tool")
LINGER = 0.05
"""Seconds the writer waits after the first queued tool step, gathering others into its commit."""


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def _capped(value: Any) -> Any:
    if _size(value) <= MAX_STEP_BYTES:
        return value
    text = json.dumps(value, ensure_ascii=False, default=str)
    return {"truncated": True, "preview": text[: MAX_STEP_BYTES // 2]}


def validate_steps(steps: Any) -> list[dict[str, Any]]:
    """The posted steps, each reduced to the OpenAI message keys; `Invalid` names each problem."""
    if not isinstance(steps, list) or not steps:
        raise Invalid({"steps": ["required: a non-empty array of {role, content, tool_calls?}"]})
    if len(steps) > MAX_STEPS_PER_POST:
        raise Invalid({"steps": [f"at most {MAX_STEPS_PER_POST} steps per post; got {len(steps)}"]})
    problems: dict[str, list[str]] = {}
    kept = []
    for i, step in enumerate(steps):
        where = f"steps.{i}"
        if not isinstance(step, dict):
            problems[where] = ["must be an object {role, content, tool_calls?}"]
            continue
        if step.get("role") not in ROLES:
            problems[f"{where}.role"] = [f"must be one of {', '.join(ROLES)}"]
        content = step.get("content")
        if content is not None and not isinstance(content, (str, list)):
            problems[f"{where}.content"] = ["must be a string, an array of content parts, or null"]
        calls = step.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list)
            and all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls)
        ):
            problems[f"{where}.tool_calls"] = [
                "must be an array of {id, type: function, function: {name, arguments}}"
            ]
        for key in ("tool_call_id", "name"):
            if step.get(key) is not None and not isinstance(step[key], str):
                problems[f"{where}.{key}"] = ["must be a string"]
        message = {k: step[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name") if k in step}
        if _size(message) > MAX_STEP_BYTES:
            raise PayloadTooLarge(f"{where} is larger than {MAX_STEP_BYTES} bytes of JSON")
        kept.append(message)
    if problems:
        raise Invalid(problems)
    return kept


def append_steps(session: Session, org_id: str, task_run_id: str, steps: Sequence[dict[str, Any]]) -> int:
    """Store posted steps (all or none); the task run's posted-step count after them."""
    held = session.scalar(
        select(func.count())
        .select_from(TrajectoryStep)
        .where(TrajectoryStep.task_run_id == task_run_id, TrajectoryStep.source == "agent")
    )
    total = int(held or 0) + len(steps)
    if total > MAX_STEPS:
        raise PayloadTooLarge(
            f"a task run keeps at most {MAX_STEPS} posted steps; this post would make {total}"
        )
    now = utcnow()
    session.execute(
        insert(TrajectoryStep),
        [
            {
                "id": new_id("trj_"),
                "org_id": org_id,
                "task_run_id": task_run_id,
                "source": "agent",
                "step": step,
                "created_at": now,
            }
            for step in steps
        ],
    )
    return total


def tool_step(
    name: str,
    arguments: Any,
    status: int,
    result: Any = None,
    error: Any = None,
    call_id: str | None = None,
    ms: float = 0.0,
) -> dict[str, Any]:
    """One executed tool call; its values are cut to size when it is queued (`_written`). A result
    given as bytes is its JSON text (`ToolOutcome.written`), spliced into the step's text."""
    step: dict[str, Any] = {"name": name, "arguments": arguments, "status": status, "ms": round(ms, 3)}
    if call_id:
        step["tool_call_id"] = call_id
    if error is not None:
        step["error"] = error
    else:
        step["result"] = result
    return step


def _written(step: dict[str, Any]) -> dict[str, Any] | JsonText:
    """A tool step as stored: its arguments and result or error capped. A step whose compact JSON
    is under half the cap has no value over it (`_size`'s spaces after `,` and `:` at most double
    it): it is queued as that text, encoded once, which the database takes as it is — measuring
    each value cost a JSON encoding each, and the step's objects kept alive in the queue until
    the writer's next batch were a load on the garbage collector's young generations."""
    result = step.get("result")
    spliced = result if isinstance(result, bytes) else None
    try:
        if spliced is None:
            text = json_bytes(step)
        else:  # `{…, "result": <its text>}`: the step's other keys, then the result as written
            text = json_bytes({key: value for key, value in step.items() if key != "result"})
            text = text[:-1] + b',"result":' + spliced + b"}"
    except (TypeError, ValueError):
        text = None
    if text is not None and len(text) <= MAX_STEP_BYTES // 2:
        return JsonText(text.decode())
    if spliced is not None:
        step = {**step, "result": json.loads(spliced)}
    return {key: _capped(value) if key in _CAPPED else value for key, value in step.items()}


_CAPPED = frozenset({"arguments", "result", "error"})


class TrajectoryLog:
    """This process's queue of tool steps and the thread that writes them (module docstring)."""

    def __init__(self, database: Database):
        self.database = database
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, org_id: str, task_run_id: str, step: dict[str, Any], at: datetime | None = None) -> None:
        """Queue one executed tool call; `at` is when it began (before the events it caused)."""
        row = {
            "id": new_id("trj_"),
            "org_id": org_id,
            "task_run_id": task_run_id,
            "source": "tool",
            "step": _written(step),  # text, not the call's objects kept alive until written
            "created_at": at or utcnow(),
        }
        with self._lock:
            first = not self._pending  # the writer is woken once per batch, not once per call
            self._pending.append(row)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="assay-trajectory", daemon=True)
                self._thread.start()
        if self._closed:  # a call finishing during shutdown: written on its own thread
            self.flush()
        elif first:
            self._wake.set()

    def close(self) -> None:
        """Write what is queued and stop the writer (the app is shutting down)."""
        self._closed = True
        self._wake.set()
        self.flush()

    def flush(self) -> None:
        """Write what is queued now, on the caller's thread; a batch the database refuses (busy,
        locked) goes back to the front of the queue, and is dropped, logged, at its third refusal
        (a task run deleted meanwhile: its steps go with it)."""
        with self._writing:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                with self.database.transaction() as session:
                    session.execute(
                        insert(TrajectoryStep),
                        [{k: v for k, v in row.items() if k != "tries"} for row in batch],
                    )
            except Exception:
                again = [{**row, "tries": row.get("tries", 0) + 1} for row in batch]
                kept = [row for row in again if row["tries"] < 3]
                if len(kept) < len(again):
                    log.exception("%d trajectory steps could not be written", len(again) - len(kept))
                with self._lock:
                    self._pending[:0] = kept
                if kept and not self._closed:
                    self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait()
            time.sleep(LINGER)  # let a burst of calls queue up: one commit for all of them
            self._wake.clear()
            if not self._closed:
                self.flush()


def export(session: Session, task_run_id: str) -> dict[str, Any]:
    """The trajectory as OpenAI chat messages, and the tool calls as the service executed them;
    both in one order (`seq`), so a viewer can interleave them with the sandbox events by time."""
    rows = session.execute(
        select(TrajectoryStep.source, TrajectoryStep.step, TrajectoryStep.created_at)
        .where(TrajectoryStep.task_run_id == task_run_id)
        .order_by(TrajectoryStep.id)
    ).all()
    messages: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    for seq, row in enumerate(rows, start=1):
        entry = {"seq": seq, "at": row.created_at.isoformat().replace("+00:00", "Z"), **(row.step or {})}
        (messages if row.source == "agent" else tool_calls).append(entry)
    return {
        "task_run_id": task_run_id,
        "format": "openai-chat",
        "messages": messages,
        "tool_calls": tool_calls,
    }


def placed_messages(session: Session, task_run_id: str) -> list[tuple[datetime, dict[str, Any]]]:
    """The posted messages, each with the time it belongs at among the sandbox events (for the
    viewer): a harness usually posts them after the fact, so a message is placed by the tool calls
    it names — an assistant message just before the first call it asked for began, a tool message
    just after its call ended — and any other right after the message before it."""
    rows = session.execute(
        select(TrajectoryStep.source, TrajectoryStep.step, TrajectoryStep.created_at)
        .where(TrajectoryStep.task_run_id == task_run_id)
        .order_by(TrajectoryStep.id)
    ).all()
    began: dict[str, tuple[datetime, float]] = {}
    for row in rows:
        call_id = (row.step or {}).get("tool_call_id") if row.source == "tool" else None
        if call_id and call_id not in began:
            began[call_id] = (row.created_at, float((row.step or {}).get("ms") or 0))
    messages = [row for row in rows if row.source == "agent"]
    tick = timedelta(microseconds=1)
    anchors: list[datetime | None] = []
    for row in messages:
        message = row.step or {}
        ids = [str(call.get("id")) for call in message.get("tool_calls") or [] if isinstance(call, dict)]
        starts = [began[i][0] for i in ids if i in began]
        anchor: datetime | None = None
        if starts:
            anchor = min(starts) - tick
        elif message.get("role") == "tool" and message.get("tool_call_id") in began:
            start, ms = began[message["tool_call_id"]]
            # Events are kept to the millisecond and may be moved on by one (`events._listed_after`):
            # the answer goes two past the call's end, after any event the call caused.
            anchor = start + timedelta(milliseconds=ms + 2)
        anchors.append(anchor)
    placed: list[tuple[datetime, dict[str, Any]]] = []
    previous: datetime | None = None
    for i, row in enumerate(messages):
        at = anchors[i]
        if at is None and previous is None:  # before the first placed message: just before it
            later = next(((j, a) for j, a in enumerate(anchors[i:], start=i) if a is not None), None)
            at = later[1] - (later[0] - i) * tick if later else row.created_at
        if at is None or (previous is not None and at <= previous):
            at = (previous or row.created_at) + tick
        placed.append((at, row.step or {}))
        previous = at
    return placed
