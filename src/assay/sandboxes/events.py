"""The sandbox event log (SPEC §1.1): every request to a surface, in order, bodies capped at 1 MiB.

`record_event` appends one `sandbox_events` row with the next per-sandbox `seq`. It runs in its
own short transaction after the request's own work committed, so a failed or refused request is
logged too and never holds the playground's write lock. Bodies are stored as JSON when they are
JSON (so `GET /sandboxes/{id}/events` shows objects), as text otherwise, when nested past
`MAX_JSON_DEPTH`, or when not strict JSON (`store.json_values`: a NaN or a lone surrogate stored as
JSON made PostgreSQL refuse the row and the event list answer 500); past `MAX_BODY` bytes the text
is cut and `truncated` is set. A NUL in the request path is written `\\x00` (PostgreSQL text holds
no NUL; the insert failed after the FHIR work was done).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Row, insert, select
from ulid import ULID

from assay.sandboxes.json_depth import nested_deeper_than
from assay.store import new_id, utcnow
from assay.store.json_values import strict_json_problem
from assay.store.models import Sandbox, SandboxEvent

__all__ = ["MAX_BODY", "record_event", "stored_body"]

MAX_BODY = 1024 * 1024


def stored_body(raw: bytes) -> tuple[Any, bool]:
    """(value to store, truncated): parsed JSON when it is JSON, else text; None when empty."""
    if not raw:
        return None, False
    if len(raw) > MAX_BODY:
        return raw[:MAX_BODY].decode("utf-8", errors="ignore"), True
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: absurdly deep JSON
        return raw.decode("utf-8", errors="replace"), False
    if nested_deeper_than(value) or strict_json_problem(value):
        # The surfaces refused it (400); listing events must not recurse, nor fail to encode it.
        return raw.decode("utf-8", errors="replace"), False
    return value, False


def record_event(
    engine: Engine,
    *,
    org_id: str,
    sandbox_id: str,
    type: str,
    method: str | None,
    path: str | None,
    status: int | None,
    request: bytes = b"",
    response: bytes = b"",
) -> str:
    """Append one event; its id. Concurrent appends to one sandbox wait for each other."""
    request_body, request_cut = stored_body(request)
    response_body, response_cut = stored_body(response)
    row = {
        "org_id": org_id,
        "sandbox_id": sandbox_id,
        "type": type,
        "method": method,
        "path": None if path is None else path.replace("\x00", "\\x00"),
        "status": status,
        "request": request_body,
        "response": response_body,
        "truncated": request_cut or response_cut,
    }
    with engine.begin() as conn:
        # Appends to one sandbox take turns on its row (PostgreSQL; SQLite's BEGIN IMMEDIATE already
        # serializes): racing on max(seq) + 1 instead made busy agents' requests fail with 409.
        conn.execute(select(Sandbox.id).where(Sandbox.id == sandbox_id).with_for_update())
        last = conn.execute(
            select(SandboxEvent.seq, SandboxEvent.created_at, SandboxEvent.id)
            .where(SandboxEvent.sandbox_id == sandbox_id)
            .order_by(SandboxEvent.seq.desc())
            .limit(1)
        ).first()
        ident, created_at = _listed_after(last)
        conn.execute(
            insert(SandboxEvent),
            [{**row, "id": ident, "created_at": created_at, "seq": (last.seq if last else 0) + 1}],
        )
    return ident


def _listed_after(last: Row[int, datetime, str] | None) -> tuple[str, datetime]:
    """(id, created_at) of the next event, taken under the sandbox's lock and never before `last`.

    Event lists page by (`created_at`, `id`) (SPEC §5), so that order must be `seq` order. Taken
    before the lock, concurrent requests were listed out of order; a worker whose clock runs behind
    another's, or two workers in the same millisecond (ids are monotonic per process only), still
    could be. So `created_at` never goes back, and on a tie the id is made to sort after `last`'s.
    """
    ident, created_at = new_id("evt_"), utcnow()
    if last is None:
        return ident, created_at
    created_at = max(created_at, last.created_at)
    if created_at == last.created_at and ident <= last.id:
        ident = "evt_" + str(ULID.from_int(int(ULID.from_str(last.id.removeprefix("evt_"))) + 1))
    return ident, created_at
