"""Calls on the phone line, stored: each action is one transaction that locks the call's row,
steps the pure line (`line/call.py`), appends what both sides said to the sandbox's transcript
through `append_turns` (the write path every voice turn takes) as `source: line`, and saves the
call's state. A failure leaves neither half written.

The line answers as the playground's payer: the `x12` dataset's definition (the one the
clearinghouse answers 270/276/278 from), else the default portal's `payer`, and the portal's
`prior_auth_requests` rows for prior-authorization status.

Calls still open when the task run ends are hung up then (`end_calls`): at `complete`, before the
capture, so the hang-up is in the graded transcript; at teardown (a cancel, the deadline) too.
That hang-up is a system write of the gate (`sandboxes/gate.py`): the sandbox's own, recorded
although the agent's writes are refused from then on.

A turn is the hot path: after the row's lock, one statement reads the gate's check, the
transcript's last number and the call's row together; the line steps; one insert writes every
turn it said and one update saves the call. The payer is parsed once per playground, and the
portal's prior-authorization rows are read only when the representative is asked about one.

With a persona model (`ASSAY_SIM_URL`) the model is never asked inside the transaction, which
holds the sandbox's row (on SQLite, the database's write lock) and would stall every other call
for as long as the model takes: `run_action` steps the line once to learn what it will say,
rolls that back, asks the model outside any transaction, then steps again under the lock with the
words fetched. The second step re-reads the call, so whatever committed meanwhile (a hang-up,
another action) is what it acts on — the dialogue manager decides from the state it locked; the
model's words only reword it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast, overload

from sqlalchemy import Connection, Engine, Table, bindparam, insert, select, update

from assay.sandboxes.gate import admit, check_of
from assay.sandboxes.payer import PayerDefinition, PayerDefinitionInvalid, parse_payer
from assay.sandboxes.portal.store import head, rows_of
from assay.sandboxes.voice.line.call import Facts, Said, begin, ringing, step
from assay.sandboxes.voice.line.config import Line, parse_line
from assay.sandboxes.voice.store import LAST_TURN, transcript, write_turns
from assay.sandboxes.voice.tables import VoiceCallRow
from assay.sandboxes.x12.store import EMPTY_PAYER
from assay.sandboxes.x12.tables import X12Payer
from assay.store import Conflict, Invalid, NotFound, new_id, utcnow
from assay.store.models import Sandbox

__all__ = [
    "CURRENT",
    "LINE_KEY",
    "VOICING_ROUNDS",
    "Restyle",
    "act",
    "acting",
    "call_view",
    "call_with_turns",
    "calls_of",
    "dialling",
    "end_calls",
    "phone_number",
    "place_call",
    "ring",
    "run_action",
]

CURRENT = "current"
"""A call id that means the task run's latest call: a reference solution's actions are fixed
paths (`voice/calls/current/say`), and the id of the call they placed is not known in advance."""
LINE_KEY = "line"
"""Where the sandbox row's `credentials` keep the line definition its `voice` datasets gave."""
Restyle = Callable[[str, str], str]
"""The persona model's rewording, (role, words) → words (`sim.restyler`)."""


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

    def get(self, conn: Connection, playground_id: str) -> PayerDefinition:
        key = (id(conn.engine), playground_id)
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                return found
        payer = _payer(conn, playground_id)
        with self.lock:
            self.entries[key] = payer
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return payer


def _payer(conn: Connection, playground_id: str) -> PayerDefinition:
    raw = conn.execute(
        select(X12Payer.definition)
        .join(Sandbox, Sandbox.id == X12Payer.sandbox_id)
        .where(Sandbox.playground_id == playground_id, Sandbox.type == "x12")
    ).scalar()
    store = head(conn, playground_id) if raw is None else None
    if raw is None and store is not None:
        raw = store.payers.get("") or next(iter(store.payers.values()), None)
    if raw is None:
        return EMPTY_PAYER
    try:
        return parse_payer(raw)
    except PayerDefinitionInvalid:  # stored past validation: answer as a payer that knows no one
        return EMPTY_PAYER


_PAYERS = _Payers()


class _PriorAuths(Sequence[dict[str, Any]]):
    """The portal's prior-authorization rows, read on first use in the action's transaction: they
    change during a run (the agent submits one), so they are read as they are now, but only the
    turn that asks about a prior authorization reads them."""

    def __init__(self, conn: Connection, playground_id: str):
        self.conn, self.playground_id = conn, playground_id
        self.rows: list[dict[str, Any]] | None = None

    def _all(self) -> list[dict[str, Any]]:
        if self.rows is None:
            store = head(self.conn, self.playground_id)
            self.rows = [
                row.row
                for slug in (store.keys if store is not None else ())
                for row in rows_of(self.conn, self.playground_id, slug, "prior_auth_requests")
            ]
        return self.rows

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())


def _facts(conn: Connection, playground_id: str, restyle: Restyle | None = None) -> Facts:
    return Facts(_PAYERS.get(conn, playground_id), _PriorAuths(conn, playground_id), restyle)


def _store(
    conn: Connection, sandbox_id: str, call_id: str, said: list[Said], last: int | None
) -> list[dict[str, Any]]:
    turns = [s.json() for s in said]
    stored = write_turns(conn, sandbox_id, turns, (last or 0) + 1, source="line", call_id=call_id)
    return [{"seq": row["seq"], **turn} for row, turn in zip(stored, turns, strict=True)]


_CALLS = cast(Table, VoiceCallRow.__table__)
_OPEN_WRITE = check_of(LAST_TURN)
"""The write gate's check and the transcript's last number, for a new call and for hang-ups."""


def _call_columns(*where: Any) -> list[Any]:
    return [
        select(column).where(*where).scalar_subquery().label(name)
        for column, name in (
            (_CALLS.c.id, "call_id"),
            (_CALLS.c.status, "call_status"),
            (_CALLS.c.state, "call_state"),
        )
    ]


_LATEST = _CALLS.alias("latest")
_LATEST_ID = (
    select(_LATEST.c.id)
    .where(_LATEST.c.sandbox_id == bindparam("sandbox_id"))
    .order_by(_LATEST.c.created_at.desc(), _LATEST.c.id.desc())
    .limit(1)
    .scalar_subquery()
)
_ACT = check_of(
    LAST_TURN,
    *_call_columns(_CALLS.c.id == bindparam("call_id"), _CALLS.c.sandbox_id == bindparam("sandbox_id")),
)
_ACT_CURRENT = check_of(LAST_TURN, *_call_columns(_CALLS.c.id == _LATEST_ID))
"""An action's one read after the lock: the gate's check, the transcript's last number and the
call's row (`current`: the latest call). Every writer of a call holds its sandbox's row, so the
call's row needs no lock of its own."""
_NEW_CALL = insert(_CALLS)
_SAVE = (
    update(_CALLS)
    .where(_CALLS.c.id == bindparam("call"))
    .values(
        state=bindparam("new_state"),
        status=bindparam("new_status"),
        end_reason=bindparam("new_reason"),
        ended_at=bindparam("new_ended_at"),
    )
)
_OPEN_CALLS = (
    select(_CALLS.c.id, _CALLS.c.state)
    .where(_CALLS.c.sandbox_id == bindparam("sandbox_id"), _CALLS.c.status.in_(("active", "ringing")))
    .order_by(_CALLS.c.created_at, _CALLS.c.id)
)


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
    last = admit(conn, sandbox_id, _OPEN_WRITE).last
    state, said = begin(_line_of(credentials), _facts(conn, playground_id, restyle), call_id, now)
    turns = _store(conn, sandbox_id, call_id, said, last)
    state["answered_at"] = time.time()
    ended = state["phase"] == "ended"
    conn.execute(
        _NEW_CALL,
        {
            "id": call_id, "sandbox_id": sandbox_id, "direction": "outbound", "number": number,
            "status": "ended" if ended else "active", "end_reason": state.get("end_reason"), "state": state,
            "created_at": now, "ended_at": now if ended else None,
        },
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
    row = admit(conn, sandbox_id, _ACT_CURRENT if call_id == CURRENT else _ACT, {"call_id": call_id})
    if row.call_id is None:
        raise NotFound("no call has been placed" if call_id == CURRENT else f"call {call_id} not found")
    call_id, status = row.call_id, row.call_status
    if action == "answer" and status != "ringing":
        raise Conflict(f"call {call_id} is not ringing ({status})")
    if action != "answer" and status == "ringing":
        raise Conflict(f"call {call_id} is ringing: answer it first (POST voice/calls/{call_id}/answer)")
    if status == "ended":
        raise Conflict(f"call {call_id} has ended ({row.call_state.get('end_reason') or 'hung up'})")
    state = dict(row.call_state)
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
    turns = _store(conn, sandbox_id, call_id, said, row.last)
    state["answered_at"] = time.time()
    ended = state["phase"] == "ended"
    conn.execute(
        _SAVE,
        {
            "call": call_id,
            "new_state": state,
            "new_status": "ended" if ended else "active",
            "new_reason": (state.get("end_reason") or "")[:64] or None,
            "new_ended_at": utcnow() if ended else None,
        },
    )
    return _answer(call_id, "ended" if ended else "active", state, turns)


T = TypeVar("T")
Action = Callable[[Connection, Restyle | None], T]
"""One action's transaction: `place_call` or `act` on a connection, with the persona's words."""
VOICING_ROUNDS = 3
"""Transactions an action with a persona model takes at most: the first learns what the line will
say, the next speaks the words fetched; a third only when what the line says changed in between
(another action committed, or a reworded line moved the virtual clock). What is still unfetched
then is said in the rules' own words."""


class _Voicing:
    """The persona's words for one action, fetched outside its transaction. Under the lock it
    answers from what was fetched and notes what was not; a failure to fetch is raised where the
    words are spoken, so the line treats it as it treats the model failing (`line/call.py`)."""

    def __init__(self, model: Restyle):
        self.model = model
        self.words: dict[tuple[str, str], str | Exception] = {}
        self.wanted: list[tuple[str, str]] = []

    def __call__(self, role: str, text: str) -> str:
        found = self.words.get((role, text))
        if found is None:
            self.wanted.append((role, text))
            return text
        if isinstance(found, Exception):
            raise found
        return found

    def fetch(self) -> None:
        for role, text in dict.fromkeys(self.wanted):
            try:
                self.words[role, text] = self.model(role, text)
            except Exception as exc:  # kept, and raised under the lock where the line can judge it
                self.words[role, text] = exc
        self.wanted = []


class _Unvoiced(Exception):
    """Roll back: the line wants words not fetched yet."""


def dialling(**call: Any) -> Action[dict[str, Any]]:
    """`place_call` with its keywords bound, as `run_action` runs it."""
    return lambda conn, restyle: place_call(conn, restyle=restyle, **call)


def acting(**call: Any) -> Action[dict[str, Any]]:
    """`act` with its keywords bound, as `run_action` runs it."""
    return lambda conn, restyle: act(conn, restyle=restyle, **call)


def call_with_turns(conn: Connection, sandbox_id: str, call_id: str) -> dict[str, Any] | None:
    """One call of the sandbox and its turns, oldest first; None when the sandbox has no such call."""
    row = conn.execute(
        select(VoiceCallRow).where(VoiceCallRow.id == call_id, VoiceCallRow.sandbox_id == sandbox_id)
    ).first()
    return None if row is None else {**call_view(row), "turns": transcript(conn, sandbox_id, call_id)}


def run_action(engine: Engine, action: Action[T], model: Restyle | None) -> T:
    """Run one action in its own transaction; with a persona model, ask the model between
    transactions, never inside one (see the module's docstring)."""
    if model is None:
        with engine.begin() as conn:
            return action(conn, None)
    voicing = _Voicing(model)
    for round_ in range(1, VOICING_ROUNDS + 1):
        try:
            with engine.begin() as conn:
                answer = action(conn, voicing)
                if voicing.wanted and round_ < VOICING_ROUNDS:
                    raise _Unvoiced
                return answer
        except _Unvoiced:
            voicing.fetch()
    raise AssertionError("unreachable: the last round returns")


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
    """Hang up every call still open on these sandboxes, the hang-up written to the transcript:
    a system write of the gate, in the transaction that ends the task run (complete, a deadline,
    a cancel), which refuses the agent's writes from then on."""
    ended, now = 0, utcnow()
    for sandbox_id in sorted(set(sandbox_ids)):  # the gate's lock order
        last = admit(conn, sandbox_id, _OPEN_WRITE, system=True).last
        for row in conn.execute(_OPEN_CALLS, {"sandbox_id": sandbox_id}).all():
            state = dict(row.state)
            at = int(state.get("clock_ms", 0))
            phase = state.get("phase")
            speaker = {"rep": "rep", "caller": "caller", "ringing": "caller"}.get(str(phase), "ivr")
            said = reason if phase != "ringing" else f"missed: {reason}"
            last = _store(conn, sandbox_id, row.id, [Said(speaker, said, "hangup", at, at)], last)[-1]["seq"]
            state.update(phase="ended", end_reason=reason)
            conn.execute(
                _SAVE,
                {"call": row.id, "new_state": state, "new_status": "ended", "new_reason": reason[:64],
                 "new_ended_at": now},
            )  # fmt: skip
            ended += 1
    return ended
