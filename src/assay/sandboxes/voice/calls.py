"""Calls on the phone line, stored: each action is one transaction that locks the call's row,
steps the pure line (`line/call.py`), appends what both sides said to the sandbox's transcript
through `append_turns` (the write path every voice turn takes) as `source: line`, and saves the
call's state. A failure leaves neither half written.

The line answers as the playground's payer: the `x12` dataset's definition (the one the
clearinghouse answers 270/276/278 from), else the default portal's `payer`, and the portal's
`prior_auth_requests` rows for prior-authorization status.

Calls still open when the task run ends are hung up then (`end_calls`): at `complete`, before the
capture, so the hang-up is in the graded transcript; at teardown (a cancel, the deadline) too.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from assay.sandboxes.payer import PayerDefinition, PayerDefinitionInvalid, parse_payer
from assay.sandboxes.portal.store import StoreHead, head, rows_of
from assay.sandboxes.voice.line.call import Facts, Said, begin, ringing, step
from assay.sandboxes.voice.line.config import Line, parse_line
from assay.sandboxes.voice.store import append_turns
from assay.sandboxes.voice.tables import VoiceCallRow
from assay.sandboxes.x12.store import EMPTY_PAYER
from assay.sandboxes.x12.tables import X12Payer
from assay.store import Conflict, Invalid, NotFound, new_id, utcnow
from assay.store.models import Sandbox

__all__ = [
    "CURRENT",
    "LINE_KEY",
    "act",
    "call_view",
    "calls_of",
    "end_calls",
    "phone_number",
    "place_call",
    "ring",
]

CURRENT = "current"
"""A call id that means the task run's latest call: a reference solution's actions are fixed
paths (`voice/calls/current/say`), and the id of the call they placed is not known in advance."""
LINE_KEY = "line"
Restyle = Callable[[str, str], str]
"""Where the sandbox row's `credentials` keep the line definition its `voice` datasets gave."""


def phone_number(credentials: Mapping[str, Any]) -> str:
    """The number the task run's line answers at (the dataset's `line.number`, else the default)."""
    return _line_of(credentials).number


def _digits(number: str) -> str:
    digits = "".join(c for c in number if c.isdigit())
    return digits[1:] if len(digits) == 11 and digits.startswith("1") else digits


def _line_of(credentials: Mapping[str, Any]) -> Line:
    return parse_line(credentials.get(LINE_KEY))


class _Payers:
    """Parsed payers by playground (bounded): a playground's payer is written once, at `start`,
    so each turn of a call need not read and validate the definition again under the call's lock."""

    def __init__(self, size: int = 256):
        self.size = size
        self.entries: OrderedDict[tuple[int, str], PayerDefinition] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, conn: Connection, playground_id: str, store: StoreHead | None) -> PayerDefinition:
        key = (id(conn.engine), playground_id)
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                return found
        payer = _payer(conn, playground_id, store)
        with self.lock:
            self.entries[key] = payer
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return payer


def _payer(conn: Connection, playground_id: str, store: StoreHead | None) -> PayerDefinition:
    raw = conn.execute(
        select(X12Payer.definition)
        .join(Sandbox, Sandbox.id == X12Payer.sandbox_id)
        .where(Sandbox.playground_id == playground_id, Sandbox.type == "x12")
    ).scalar()
    if raw is None and store is not None:
        raw = store.payers.get("") or next(iter(store.payers.values()), None)
    if raw is None:
        return EMPTY_PAYER
    try:
        return parse_payer(raw)
    except PayerDefinitionInvalid:  # stored past validation: answer as a payer that knows no one
        return EMPTY_PAYER


_PAYERS = _Payers()


def _facts(conn: Connection, playground_id: str, restyle: Restyle | None = None) -> Facts:
    store = head(conn, playground_id)
    auths: list[dict[str, Any]] = []
    if store is not None:
        for slug in store.keys:
            auths += [row.row for row in rows_of(conn, playground_id, slug, "prior_auth_requests")]
    return Facts(_PAYERS.get(conn, playground_id, store), auths, restyle)


def _store(
    conn: Connection, sandbox_id: str, call_id: str, said: list[Said], *, gated: bool = True
) -> list[dict[str, Any]]:
    turns = [s.json() for s in said]
    stored = append_turns(conn, sandbox_id, turns, seeded=False, source="line", call_id=call_id, gated=gated)
    return [{"seq": row["seq"], **turn} for row, turn in zip(stored, turns, strict=True)]


def place_call(
    conn: Connection,
    *,
    sandbox_id: str,
    playground_id: str,
    task_run_id: str,
    credentials: Mapping[str, Any],
    to: Any,
    restyle: Restyle | None = None,
) -> dict[str, Any]:
    """Dial the line: a new call and the line's first words."""
    if not isinstance(to, str) or not to.strip():
        raise Invalid({"to": ["the number to dial is required: credentials.voice.phone_number"]})
    number = phone_number(credentials)
    if _digits(to) != _digits(number):
        raise Invalid({"to": [f"no line answers at {to!r}; this task run's line is {number}"]})
    call_id, now = new_id("call_"), utcnow()
    conn.execute(select(Sandbox.id).where(Sandbox.id == sandbox_id).with_for_update())
    state, said = begin(_line_of(credentials), _facts(conn, playground_id, restyle), call_id, now)
    turns = _store(conn, sandbox_id, call_id, said)
    state["answered_at"] = time.time()
    ended = state["phase"] == "ended"
    conn.execute(
        insert(VoiceCallRow).values(
            id=call_id, sandbox_id=sandbox_id, direction="outbound", number=number,
            status="ended" if ended else "active", end_reason=state.get("end_reason"), state=state,
            created_at=now, ended_at=now if ended else None,
        )
    )  # fmt: skip
    return _answer(call_id, "ended" if ended else "active", state, turns)


def act(
    conn: Connection,
    *,
    sandbox_id: str,
    playground_id: str,
    credentials: Mapping[str, Any],
    call_id: str,
    action: str,
    value: str,
    barge_in: bool = False,
    restyle: Restyle | None = None,
) -> dict[str, Any]:
    """One agent action on a call; what the line said next."""
    conn.execute(select(Sandbox.id).where(Sandbox.id == sandbox_id).with_for_update())
    statement = select(VoiceCallRow.id, VoiceCallRow.status, VoiceCallRow.state).where(
        VoiceCallRow.sandbox_id == sandbox_id
    )
    if call_id == CURRENT:
        statement = statement.order_by(VoiceCallRow.created_at.desc(), VoiceCallRow.id.desc()).limit(1)
    else:
        statement = statement.where(VoiceCallRow.id == call_id)
    row = conn.execute(statement.with_for_update()).first()
    if row is None:
        raise NotFound("no call has been placed" if call_id == CURRENT else f"call {call_id} not found")
    call_id = row.id
    if action == "answer" and row.status != "ringing":
        raise Conflict(f"call {row.id} is not ringing ({row.status})")
    if action != "answer" and row.status == "ringing":
        raise Conflict(f"call {row.id} is ringing: answer it first (POST voice/calls/{row.id}/answer)")
    if row.status == "ended":
        raise Conflict(f"call {row.id} has ended ({row.state.get('end_reason') or 'hung up'})")
    state = dict(row.state)
    latency = int(max(0.0, time.time() - float(state.get("answered_at") or time.time())) * 1000)
    said = step(
        _line_of(credentials),
        _facts(conn, playground_id, restyle),
        state,
        action,
        value,
        latency,
        barge_in=barge_in,
    )
    turns = _store(conn, sandbox_id, call_id, said)
    state["answered_at"] = time.time()
    ended = state["phase"] == "ended"
    conn.execute(
        update(VoiceCallRow)
        .where(VoiceCallRow.id == call_id)
        .values(
            state=state,
            status="ended" if ended else "active",
            end_reason=(state.get("end_reason") or "")[:64] or None,
            ended_at=utcnow() if ended else None,
        )
    )
    return _answer(call_id, "ended" if ended else "active", state, turns)


def _answer(
    call_id: str, status: str, state: Mapping[str, Any], turns: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "call_id": call_id,
        "status": status,
        "said": [t for t in turns if t["speaker"] != "agent"],
        "turns": turns,
        "clock_ms": state.get("clock_ms", 0),
        **({"end_reason": state["end_reason"]} if state.get("end_reason") else {}),
    }


def ring(conn: Connection, sandbox_id: str, line: Line) -> None:
    """One ringing inbound call per persona of `line.incoming` (at `start`)."""
    now = utcnow()
    for persona in line.incoming:
        call_id = new_id("call_")
        conn.execute(
            insert(VoiceCallRow).values(
                id=call_id, sandbox_id=sandbox_id, direction="inbound", number=persona.number, status="ringing",
                end_reason=None, state=ringing(persona.model_dump(), call_id, line.clock_start or now),
                created_at=now, ended_at=None,
            )
        )  # fmt: skip


def calls_of(conn: Connection, sandbox_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(VoiceCallRow).where(VoiceCallRow.sandbox_id == sandbox_id).order_by(VoiceCallRow.id)
    ).all()
    return [call_view(row) for row in rows]


def call_view(row: Any) -> dict[str, Any]:
    state = row.state or {}
    return {
        "call_id": row.id,
        "direction": row.direction,
        "number": row.number,
        "status": row.status,
        "end_reason": row.end_reason,
        "clock_ms": state.get("clock_ms", 0),
        "phase": state.get("phase"),
        "created_at": row.created_at.isoformat() if isinstance(row.created_at, datetime) else row.created_at,
    }


def end_calls(conn: Connection, sandbox_ids: list[str], reason: str) -> int:
    """Hang up every call still open on these sandboxes, the hang-up written to the transcript."""
    if not sandbox_ids:
        return 0
    rows = conn.execute(
        select(VoiceCallRow.id, VoiceCallRow.sandbox_id, VoiceCallRow.state).where(
            VoiceCallRow.sandbox_id.in_(sandbox_ids), VoiceCallRow.status.in_(("active", "ringing"))
        )
    ).all()
    now = utcnow()
    for row in rows:
        state = dict(row.state)
        at = int(state.get("clock_ms", 0))
        phase = state.get("phase")
        speaker = {"rep": "rep", "caller": "caller", "ringing": "caller"}.get(str(phase), "ivr")
        said = reason if phase != "ringing" else f"missed: {reason}"
        # The sandbox's own write, in the transaction that ends the task run (complete, a
        # deadline, a cancel): past the write gate, which refuses the agent's writes from then on.
        _store(conn, row.sandbox_id, row.id, [Said(speaker, said, "hangup", at, at)], gated=False)
        state.update(phase="ended", end_reason=reason)
        conn.execute(
            update(VoiceCallRow)
            .where(VoiceCallRow.id == row.id)
            .values(state=state, status="ended", end_reason=reason[:64], ended_at=now)
        )
    return len(rows)
