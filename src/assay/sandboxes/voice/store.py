"""Voice turns (docs/sandboxes.md): validated whole, then appended in one transaction.

A request's turns are all checked before any is written, so a batch with one unknown speaker
stores nothing (422 naming `<i>.speaker`). Turns are numbered per sandbox in arrival order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Select, Table, bindparam, func, insert, select
from sqlalchemy.orm import Session

from assay.core.state import VoiceTurn
from assay.sandboxes.gate import admit, check_of
from assay.sandboxes.voice.tables import VoiceTurnRow
from assay.store import utcnow
from assay.store.models import Sandbox

__all__ = [
    "LAST_TURN",
    "LINE_SPEAKERS",
    "MAX_TEXT",
    "SPEAKERS",
    "append_turns",
    "last_turn",
    "transcript",
    "turn_problems",
    "turns_until",
    "write_turns",
]

SPEAKERS = ("agent", "caller", "ivr", "rep")
LINE_SPEAKERS = ("ivr", "rep")
"""The phone line's own voices: only the line (and a task author's seeded turns) writes them."""
MAX_TEXT = 100_000
"""Characters in one turn's text (a minute of speech is ~1,000)."""
_KEYS = frozenset({"speaker", "text", "start_ms", "end_ms"})


def _ms(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def turn_problems(turns: Sequence[Any], prefix: str = "") -> dict[str, list[str]]:
    """`{"<prefix><i>.<key>": [message]}` for every bad turn; `{}` when all are valid."""
    errors: dict[str, list[str]] = {}
    for i, turn in enumerate(turns):
        at = f"{prefix}{i}"
        if not isinstance(turn, dict):
            errors[at] = ["must be a turn object {speaker, text, start_ms?, end_ms?}"]
            continue
        for key in sorted(set(turn) - _KEYS):
            errors[f"{at}.{key}"] = ["unknown key"]
        if turn.get("speaker") not in SPEAKERS:
            errors[f"{at}.speaker"] = [f"must be one of {', '.join(SPEAKERS)}, got {turn.get('speaker')!r}"]
        text = turn.get("text")
        if not isinstance(text, str):
            errors[f"{at}.text"] = ["must be a string"]
        elif len(text) > MAX_TEXT:
            errors[f"{at}.text"] = [f"is longer than {MAX_TEXT} characters"]
        for key in ("start_ms", "end_ms"):
            if not _ms(turn.get(key)):
                errors[f"{at}.{key}"] = ["must be a non-negative integer (milliseconds)"]
        start, end = turn.get("start_ms"), turn.get("end_ms")
        if isinstance(start, int) and isinstance(end, int) and _ms(start) and _ms(end) and end < start:
            errors[f"{at}.end_ms"] = ["must not be before start_ms"]
    return errors


_LAST = select(func.max(VoiceTurnRow.seq)).where(VoiceTurnRow.sandbox_id == bindparam("sandbox_id"))
LAST_TURN = _LAST.scalar_subquery().label("last")
"""The sandbox's last turn number as a column of the write gate's check (`check_of(LAST_TURN,
…)`): read in the statement after the lock, so the next number is taken under it."""
_ADMIT = check_of(LAST_TURN)
"""The write gate's check and the last turn's number: one statement after the lock."""
_INSERT = insert(cast(Table, VoiceTurnRow.__table__))
"""Core, not the ORM's bulk insert: the rows are plain dicts already, and this is every turn's path."""


def append_turns(
    conn: Connection,
    sandbox_id: str,
    turns: Sequence[Mapping[str, Any]],
    *,
    seeded: bool,
    source: str | None = None,
    call_id: str | None = None,
    system: bool = False,
) -> list[dict[str, Any]]:
    """Insert valid turns with the next numbers; appends to one sandbox take turns on its row.
    `source` defaults to `seeded` or `reported`; a turn's own `kind` (line turns) is kept.

    An agent's turns (`seeded` False: reported ones and the line's alike) go through the write
    gate (`sandboxes/gate.py`): `SandboxClosed`, nothing stored, once the task run takes no writes.
    `system` True is the gate's system write (the line's own hang-up when the task run ends).
    Seeding runs inside `start`, before the task run is started, and only takes the row."""
    if seeded:
        if conn.dialect.name != "sqlite":
            conn.execute(select(Sandbox.id).where(Sandbox.id == sandbox_id).with_for_update())
        last = conn.execute(_LAST, {"sandbox_id": sandbox_id}).scalar()
    else:
        last = admit(conn, sandbox_id, _ADMIT, system=system).last
    return write_turns(
        conn, sandbox_id, turns, (last or 0) + 1, seeded=seeded, source=source, call_id=call_id
    )


def write_turns(
    conn: Connection,
    sandbox_id: str,
    turns: Sequence[Mapping[str, Any]],
    first: int,
    *,
    seeded: bool = False,
    source: str | None = None,
    call_id: str | None = None,
) -> list[dict[str, Any]]:
    """Insert turns numbered from `first` in one statement; the rows written. The caller has
    opened the write through the gate (`admit`) and read `LAST_TURN` under its lock."""
    now = utcnow()
    rows = [
        {
            "sandbox_id": sandbox_id,
            "seq": first + i,
            "speaker": turn["speaker"],
            "text": turn["text"],
            "start_ms": turn.get("start_ms"),
            "end_ms": turn.get("end_ms"),
            "seeded": seeded,
            "created_at": now,
            "source": source or ("seeded" if seeded else "reported"),
            "call_id": call_id,
            "kind": turn.get("kind") or "speech",
        }
        for i, turn in enumerate(turns)
    ]
    if rows:
        conn.execute(_INSERT, rows)
    return rows


def transcript(conn: Connection, sandbox_id: str, call_id: str | None = None) -> list[dict[str, Any]]:
    statement = select(VoiceTurnRow).where(VoiceTurnRow.sandbox_id == sandbox_id)
    if call_id is not None:
        statement = statement.where(VoiceTurnRow.call_id == call_id)
    rows = conn.execute(statement.order_by(VoiceTurnRow.seq)).all()
    return [_json(row) for row in rows]


def _json(row: Any) -> dict[str, Any]:
    body = {"seq": row.seq, "speaker": row.speaker, "text": row.text, "seeded": row.seeded}
    for key in ("source", "call_id", "kind", "start_ms", "end_ms"):
        if getattr(row, key) is not None:
            body[key] = getattr(row, key)
    return body


def last_turn(sandbox_id: str) -> Select[int]:
    """The sequence number of the sandbox's last turn (NULL: none yet)."""
    return select(func.max(VoiceTurnRow.seq)).where(VoiceTurnRow.sandbox_id == sandbox_id)


def turns_until(session: Session, sandbox_id: str, seq: int) -> list[VoiceTurn]:
    rows = session.execute(
        select(
            VoiceTurnRow.speaker,
            VoiceTurnRow.text,
            VoiceTurnRow.start_ms,
            VoiceTurnRow.end_ms,
            VoiceTurnRow.source,
            VoiceTurnRow.call_id,
            VoiceTurnRow.kind,
        )
        .where(VoiceTurnRow.sandbox_id == sandbox_id, VoiceTurnRow.seq <= seq)
        .order_by(VoiceTurnRow.seq)
    ).all()
    return [
        VoiceTurn(
            row.speaker, row.text, row.start_ms, row.end_ms, row.source, row.call_id, row.kind or "speech"
        )
        for row in rows
    ]
