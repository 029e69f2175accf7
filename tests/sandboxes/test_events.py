"""The event log lists a sandbox's events in the order they were appended (SPEC §1.1 `seq`; §5: event
lists oldest first). Lists page by (`created_at`, `id`), but `record_event` took both before waiting
for the sandbox's lock, so concurrent requests (or a worker whose clock runs behind) were listed out
of `seq` order: 57 concurrent FHIR requests on SQLite came back as seq 1, 2, 4, 3, …"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from assay.sandboxes import event_rows, events
from assay.sandboxes.events import record_event
from assay.store import utcnow
from assay.store.models import SandboxEvent
from assay.store.write_queue import queue_of
from tests.service.builders import make_benchmark, ok, org_id_of, start_run
from tests.service.conftest import Server


def _fhir_sandbox(server: Server, api: httpx.Client) -> tuple[str, str]:
    """(org id, fhir sandbox id) of a freshly started task run."""
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    with server.client(run.token) as agent:
        playground_id = ok(agent.post(run.task_runs[0]["start_url"]))["playground_id"]
    playground = ok(api.get(f"/playgrounds/{playground_id}"))
    [fhir] = [box for box in playground["sandboxes"] if box["type"] == "fhir"]
    return org_id_of(server, server.org_key), fhir["id"]


def _count_copies(monkeypatch: pytest.MonkeyPatch, rows: list[int]) -> None:
    """Note the rows of each COPY the event log writes (PostgreSQL), which SQLAlchemy's
    statement events do not see."""
    real = event_rows.copy

    def copy(conn: Any, batch: list[dict[str, Any]]) -> None:
        rows.append(len(batch))
        real(conn, batch)

    monkeypatch.setattr(event_rows, "copy", copy)


def test_events_list_in_seq_order_when_clocks_disagree(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    org_id, sandbox_id = _fhir_sandbox(server, api)
    start = utcnow()
    clocks = iter([start + timedelta(seconds=5), start, start, start - timedelta(seconds=1)])
    monkeypatch.setattr(events, "utcnow", lambda: next(clocks))
    for n in range(4):
        record_event(
            server.database.engine, org_id=org_id, sandbox_id=sandbox_id, type="fhir_request",
            method="GET", path=f"/e{n}", status=200,
        )  # fmt: skip
    listed = ok(api.get(f"/sandboxes/{sandbox_id}/events", params={"limit": 100}))["data"]
    assert [(e["seq"], e["path"]) for e in listed] == [(n + 1, f"/e{n}") for n in range(4)]
    stamps = [e["created_at"] for e in listed]
    assert stamps == sorted(stamps)
    paged, cursor = [], None
    while True:
        page = ok(api.get(f"/sandboxes/{sandbox_id}/events", params={"limit": 1, "cursor": cursor or ""}))
        paged += [e["seq"] for e in page["data"]]
        cursor = page["_meta"]["next"]
        if not cursor:
            break
    assert paged == [1, 2, 3, 4]


def test_queued_events_are_all_written_in_order_with_the_ids_returned(
    server: Server, api: httpx.Client
) -> None:
    """`record_event` queues (issue 9: no write transaction per request); the list flushes first, so
    every event is there, each thread's in the order it recorded them, under the id it was given.
    An event the database refuses (an unknown sandbox) is logged and does not take its batch down."""
    import threading

    org_id, sandbox_id = _fhir_sandbox(server, api)
    returned: dict[int, list[str]] = {}

    def record(thread: int) -> None:
        returned[thread] = [
            record_event(
                server.database.engine, org_id=org_id, sandbox_id=sandbox_id if n != 3 else "sbx_gone",
                type="fhir_request", method="GET", path=f"/t{thread}/{n}", status=200, response=b'{"n":1}',
            )
            for n in range(25)
        ]  # fmt: skip

    threads = [threading.Thread(target=record, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    listed: list[dict[str, object]] = []
    cursor = ""
    while True:
        page = ok(api.get(f"/sandboxes/{sandbox_id}/events", params={"limit": 100, "cursor": cursor}))
        listed += page["data"]
        cursor = page["_meta"]["next"] or ""
        if not cursor:
            break
    assert [event["seq"] for event in listed] == list(range(1, 4 * 24 + 1))
    assert all(event["response"] == {"n": 1} for event in listed)
    for thread, ids in returned.items():
        mine = [event for event in listed if str(event["path"]).startswith(f"/t{thread}/")]
        assert [event["path"] for event in mine] == [f"/t{thread}/{n}" for n in range(25) if n != 3]
        assert [event["id"] for event in mine] == [ident for n, ident in enumerate(ids) if n != 3]


def test_a_lingering_writer_writes_one_batch_and_a_flush_or_shutdown_cuts_the_wait_short(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer waits a little for more events before it writes (issue 9: one transaction per
    batch, not per request); a flush (event lists, `complete`) or shutdown never waits for that
    linger — it writes what is queued itself — and nothing queued is lost. With the linger made a
    minute, a flush that waited for it would give up (`Busy`) after its 10 s instead of returning.
    A batch is one multi-row INSERT (a statement per row released the GIL per row), on PostgreSQL
    one COPY."""
    from sqlalchemy import event as sa_event

    org_id, sandbox_id = _fhir_sandbox(server, api)
    engine = server.database.engine
    events.flush_events(engine)
    monkeypatch.setattr(events, "_LINGER", 60.0)
    inserts: list[int] = []

    def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if statement.startswith("INSERT INTO sandbox_events"):
            inserts.append(statement.count("), (") + 1)  # rows in its VALUES

    def record(n: int) -> None:
        record_event(
            engine, org_id=org_id, sandbox_id=sandbox_id, type="fhir_request",
            method="GET", path=f"/b{n}", status=200,
        )  # fmt: skip

    _count_copies(monkeypatch, inserts)
    sa_event.listen(engine, "before_cursor_execute", count)
    try:
        for n in range(30):
            record(n)
        events.flush_events(engine, timeout=10)
        written = list(inserts)
        for n in range(30, 40):
            record(n)
        events.close_event_logs(engine, timeout=10)  # shutdown drains what is queued
    finally:
        sa_event.remove(engine, "before_cursor_execute", count)
    assert len(written) == 1, "30 events queued while the writer lingered are one INSERT (COPY)"
    assert len(inserts) == 2, inserts
    # SQLite: one statement with 30 rows, not 30 executions of one row. PostgreSQL: one COPY.
    assert inserts == [30, 10], inserts
    listed = ok(api.get(f"/sandboxes/{sandbox_id}/events", params={"limit": 100}))["data"]
    assert [e["path"] for e in listed] == [f"/b{n}" for n in range(40)]
    assert [e["seq"] for e in listed] == list(range(1, 41))


def test_a_rendered_fhir_response_is_stored_as_the_json_it_is(server: Server, api: httpx.Client) -> None:
    """The FHIR surface's own JSON bodies go to the event log as text, not parsed, walked and
    re-encoded (issue 9); listed, they are the objects the agent was sent, non-ASCII text included."""
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        playground_id = ok(agent.post(run.task_runs[0]["start_url"]))["playground_id"]
        base = f"/v1/task-runs/{task_run_id}/fhir"
        patient = {"resourceType": "Patient", "name": [{"family": "Ünal"}]}
        assert agent.post(f"{base}/Patient", json=patient).status_code == 201
        searched = agent.get(f"{base}/Patient", params={"family": "Ünal"})
        assert searched.status_code == 200
    [fhir] = [
        box for box in ok(api.get(f"/playgrounds/{playground_id}"))["sandboxes"] if box["type"] == "fhir"
    ]
    listed = ok(api.get(f"/sandboxes/{fhir['id']}/events", params={"limit": 100}))["data"]
    assert listed[-1]["response"] == searched.json()
    assert listed[-1]["response"]["entry"][0]["resource"]["name"] == [{"family": "Ünal"}]
    assert listed[-1]["truncated"] is False


def test_rendered_json_on_an_engine_without_the_pass_through_is_parsed(tmp_path: Path) -> None:
    """`JsonText` is bound as it is only where the engine's serializer knows it
    (`store.json_values.serialize_json`, set by `Database`); elsewhere the body is parsed as before."""
    from sqlalchemy import create_engine

    from assay.store.json_values import JsonText, serialize_json

    assert serialize_json(JsonText('{"a":[1,2]}')) == '{"a":[1,2]}'
    assert json.loads(serialize_json({"a": "x"})) == {"a": "x"}  # any spelling (orjson's since issue 9)
    plain = events._EventLog(create_engine(f"sqlite:///{tmp_path / 'plain.db'}"))
    queued = events._Queued("evt_1", utcnow(), "org", "sbx", "fhir_request", "GET", "/p", 200, b"",
                            b'{"a":[1,2]}', True)  # fmt: skip
    assert events._row(queued, plain._passthrough)["response"] == {"a": [1, 2]}
    assert events._row(queued, True)["response"] == JsonText('{"a":[1,2]}')


def test_the_event_writer_takes_its_turn_at_the_sqlite_write_lock_in_line(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event log's writes queue for this process's SQLite write lock with the request
    transactions, first come first served (issue 9): before, they met only at SQLite's own lock,
    whose busy handler polls with growing sleeps, and a steady writer kept a waiting `complete`
    out. A transaction that asks after a flush started waits for the flush's write."""
    import threading

    if not server.database.is_sqlite:
        pytest.skip("PostgreSQL locks rows, not the database")
    org_id, sandbox_id = _fhir_sandbox(server, api)
    database, engine = server.database, server.database.engine
    events.flush_events(engine)
    monkeypatch.setattr(events, "_LINGER", 60.0)  # only the flush writes
    lock = queue_of(engine)
    assert lock is not None
    order: list[str] = []

    def flush() -> None:
        events.flush_events(engine, timeout=30)

    real_append = events._append

    def append_in_its_turn(conn: Any, rows: list[dict[str, Any]]) -> None:
        order.append("flush")  # noted while the flush holds the lock, not after it let go
        real_append(conn, rows)

    monkeypatch.setattr(events, "_append", append_in_its_turn)

    def transaction() -> None:
        with database.transaction() as session:
            session.execute(text("SELECT 1"))  # the turn is taken where the transaction begins
            order.append("transaction")

    # The shared server's own threads (its sweeper) may queue too: watch for ours by name.
    arrived: list[str] = []
    acquire = lock.acquire

    def acquire_noting_who(timeout: float) -> bool:
        arrived.append(threading.current_thread().name)
        return acquire(timeout)

    monkeypatch.setattr(lock, "acquire", acquire_noting_who)
    threads = [threading.Thread(target=flush), threading.Thread(target=transaction)]
    with database.transaction() as holder:
        holder.execute(text("SELECT 1"))
        record_event(
            engine, org_id=org_id, sandbox_id=sandbox_id, type="fhir_request",
            method="GET", path="/in-line", status=200,
        )  # fmt: skip
        for thread in threads:
            before = lock.waiting  # we hold the lock: the line only grows meanwhile
            thread.start()
            for _ in range(30_000):  # bounded: until the thread waits in line
                if thread.name in arrived and lock.waiting > before:
                    break
                time.sleep(0.001)
            assert thread.name in arrived and lock.waiting > before
    for thread in threads:
        thread.join(timeout=30)
    assert order == ["flush", "transaction"]
    listed = ok(api.get(f"/sandboxes/{sandbox_id}/events", params={"limit": 100}))["data"]
    assert listed[-1]["path"] == "/in-line"


def test_a_flush_for_some_sandboxes_writes_theirs_in_order_and_leaves_the_others_queued(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`complete` and the event lists flush only their own sandboxes' events (issue 9: under agent
    load the queue holds every run's traffic, and writing all of it first made each `complete`
    wait for everyone). Each sandbox's events still get their `seq` in the order they were queued."""

    (org_a, box_a), (org_b, box_b) = _fhir_sandbox(server, api), _fhir_sandbox(server, api)
    engine = server.database.engine
    events.flush_events(engine)
    monkeypatch.setattr(events, "_LINGER", 60.0)  # the writer thread waits: only flushes write

    def stored(sandbox_id: str) -> list[tuple[int, str]]:
        with server.database.reading() as session:
            rows = session.execute(
                select(SandboxEvent.seq, SandboxEvent.path)
                .where(SandboxEvent.sandbox_id == sandbox_id)
                .order_by(SandboxEvent.seq)
            )
            return [(seq, path) for seq, path in rows]

    for n in range(20):
        for org_id, box, name in ((org_a, box_a, "a"), (org_b, box_b, "b")):
            record_event(
                engine, org_id=org_id, sandbox_id=box, type="fhir_request",
                method="GET", path=f"/{name}{n}", status=200,
            )  # fmt: skip
    events.flush_events(engine, timeout=10, sandbox_ids=[box_a])
    assert stored(box_a) == [(n + 1, f"/a{n}") for n in range(20)]
    assert stored(box_b) == [] and events.events_pending(engine), "the other sandbox's are still queued"

    # Through the API: a sandbox's event list flushes that sandbox's events.
    listed = ok(api.get(f"/sandboxes/{box_b}/events", params={"limit": 100}))["data"]
    assert [(e["seq"], e["path"]) for e in listed] == [(n + 1, f"/b{n}") for n in range(20)]
    assert not events.events_pending(engine)


def test_a_flush_for_a_task_run_writes_its_sandboxes_and_any_with_an_event_of_no_known_run(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`complete` flushes by task run: each queued event carries the task run its surface served
    it for, so no SQL is needed to find the run's sandboxes (issue 9: one round trip fewer per
    `complete`). An event queued without a task run may be any run's: its sandbox is written too,
    whole and in order (a sandbox's `seq` is the order its events were queued)."""
    boxes = [_fhir_sandbox(server, api) for _ in range(3)]
    engine = server.database.engine
    events.flush_events(engine)
    monkeypatch.setattr(events, "_LINGER", 60.0)  # the writer thread waits: only flushes write

    def paths(sandbox_id: str) -> list[str]:
        with server.database.reading() as session:
            rows = session.scalars(
                select(SandboxEvent.path)
                .where(SandboxEvent.sandbox_id == sandbox_id)
                .order_by(SandboxEvent.seq)
            )
            return list(rows)

    for n in range(5):
        for (org_id, box), run in zip(boxes, ("tr_a", "tr_b", "tr_c"), strict=True):
            record_event(
                engine, org_id=org_id, sandbox_id=box, type="fhir_request",
                method="GET", path=f"/{run}/{n}", status=200, task_run_id=run,
            )  # fmt: skip
    (org_c, box_c) = boxes[2]
    record_event(
        engine, org_id=org_c, sandbox_id=box_c, type="fhir_request", method="GET", path="/?", status=200
    )
    events.flush_events(engine, timeout=10, task_run_id="tr_a")
    assert paths(boxes[0][1]) == [f"/tr_a/{n}" for n in range(5)]
    assert paths(box_c) == [*(f"/tr_c/{n}" for n in range(5)), "/?"], "whole, in order"
    assert paths(boxes[1][1]) == [] and events.events_pending(engine), "another run's stay queued"
    events.flush_events(engine, timeout=10, task_run_id="tr_b")
    assert paths(boxes[1][1]) == [f"/tr_b/{n}" for n in range(5)]
    assert not events.events_pending(engine)


def test_a_batch_keeps_tabs_newlines_backslashes_and_nulls_exactly(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's batch (on PostgreSQL one COPY text payload built by `event_rows._copy_payload`)
    stores each field as the one-row INSERT would: a path, a text body and a JSON body holding
    tabs, newlines, CRs and backslashes, and the absent method and status, read back unchanged."""
    org_id, box = _fhir_sandbox(server, api)
    engine = server.database.engine
    events.flush_events(engine)
    monkeypatch.setattr(events, "_LINGER", 60.0)  # only the flush writes: one batch
    copies: list[int] = []
    _count_copies(monkeypatch, copies)
    awkward = "a\tb\\c\nd\re\\\\N \\N end\\"
    json_body = json.dumps({"text": "x\ty\nz\\ \\N", "n": [1, None]}).encode()
    written = [
        (f"/tricky/{awkward}", awkward.encode(), json_body, "GET", 200),
        ("/plain", b"", b"", None, None),
        ("/json", json_body, json_body, "POST", 201),
    ]
    for path, request, response, method, status in written:
        record_event(
            engine, org_id=org_id, sandbox_id=box, type="fhir_request",
            method=method, path=path, status=status, request=request, response=response,
        )  # fmt: skip
    events.flush_events(engine, timeout=10)
    if server.backend == "postgres":
        assert copies == [3], "one COPY for the batch"
    listed = ok(api.get(f"/sandboxes/{box}/events", params={"limit": 100}))["data"]
    got = [(e["path"], e["request"], e["response"], e["method"], e["status"]) for e in listed]
    assert got == [
        (f"/tricky/{awkward}", awkward, json.loads(json_body), "GET", 200),
        ("/plain", None, None, None, None),
        ("/json", json.loads(json_body), json.loads(json_body), "POST", 201),
    ]


def test_a_batch_ends_at_its_byte_budget_and_keeps_the_order(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer holds SQLite's write lock for a whole batch, so a batch also ends at
    `_BATCH_BYTES` of bodies (issue 9: 500 search answers, ≈ 3 MB, kept a `complete` waiting for
    the lock): 12 events of 40 KB with a 100 KB budget are four INSERTs (COPYs) of three, in order — for a
    full flush and for a flush of one sandbox alike."""
    from sqlalchemy import event as sa_event

    (org_a, box_a), (org_b, box_b) = _fhir_sandbox(server, api), _fhir_sandbox(server, api)
    engine = server.database.engine
    events.flush_events(engine)
    monkeypatch.setattr(events, "_LINGER", 60.0)  # only flushes write
    monkeypatch.setattr(events, "_BATCH_BYTES", 100_000)
    body = json.dumps({"pad": "x" * 40_000}).encode()
    inserts: list[int] = []

    def count(_conn: object, _cursor: object, statement: str, parameters: object, *_: object) -> None:
        if statement.startswith("INSERT INTO sandbox_events"):
            inserts.append(len(parameters) if isinstance(parameters, list) else statement.count("), (") + 1)

    _count_copies(monkeypatch, inserts)
    sa_event.listen(engine, "before_cursor_execute", count)
    try:
        for n in range(12):
            for org_id, box, name in ((org_a, box_a, "a"), (org_b, box_b, "b")):
                record_event(
                    engine, org_id=org_id, sandbox_id=box, type="fhir_request",
                    method="GET", path=f"/{name}{n}", status=200, response=body,
                )  # fmt: skip
        events.flush_events(engine, timeout=10, sandbox_ids=[box_a])
        selective = list(inserts)
        events.flush_events(engine, timeout=10)
    finally:
        sa_event.remove(engine, "before_cursor_execute", count)
    assert selective == [3, 3, 3, 3], selective  # PostgreSQL: COPYs of three rows
    assert inserts[4:] == [3, 3, 3, 3], inserts
    for box, name in ((box_a, "a"), (box_b, "b")):
        listed = ok(api.get(f"/sandboxes/{box}/events", params={"limit": 100}))["data"]
        assert [(e["seq"], e["path"]) for e in listed] == [(n + 1, f"/{name}{n}") for n in range(12)]


def test_complete_writes_its_queued_events_on_its_own_thread_before_its_transaction(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`complete` flushes its sandboxes' queued events first, on the thread that then runs its
    transaction: one thread hand-off for the whole call (issue 9: as a dependency of its own the
    flush was a hand-off each way, 12–27 ms of a `complete` under agent load, each one a wait for
    the busy event loop); the events are in the task run's event list."""
    import threading

    import anyio.to_thread

    from assay.service import deps

    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    engine = server.database.engine
    seen: list[tuple[str, int]] = []
    real_flush, real_transaction = deps.flush_events, server.database.transaction
    real_run_sync = anyio.to_thread.run_sync

    def flush(*args: object, **kwargs: object) -> None:
        seen.append(("flush", threading.get_ident()))
        real_flush(*args, **kwargs)  # type: ignore[arg-type]

    def transaction(*args: object, **kwargs: object) -> object:
        if threading.current_thread().name != "assay-sweeper":  # the shared server's own, any time
            seen.append(("transaction", threading.get_ident()))
        return real_transaction(*args, **kwargs)  # type: ignore[arg-type]

    async def run_sync(*args: object, **kwargs: object) -> object:
        seen.append(("hand-off", threading.get_ident()))
        return await real_run_sync(*args, **kwargs)  # type: ignore[arg-type]

    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        events.flush_events(engine)
        monkeypatch.setattr(events, "_LINGER", 60.0)  # the agent's events stay queued
        for n in range(5):
            assert (
                agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient", params={"_id": f"p{n}"}).status_code
                == 200
            )
        assert events.events_pending(engine)
        monkeypatch.setattr(deps, "flush_events", flush)
        monkeypatch.setattr(server.database, "transaction", transaction)
        monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
        ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    monkeypatch.undo()
    assert [kind for kind, _ in seen[:3]] == ["hand-off", "flush", "transaction"], seen
    assert [kind for kind, _ in seen].count("hand-off") == 1, seen
    assert seen[1][1] == seen[2][1], "the flush and the transaction ran on one thread"
    listed = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 100}))["data"]
    searches = [e for e in listed if str(e["path"]).split("?")[0].endswith("/fhir/Patient")]
    assert len(searches) == 5, listed


def test_a_batch_by_copy_stores_what_the_insert_stored_and_a_refused_row_spares_the_others(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a writer's batch goes by COPY, its sandboxes locked and their last events read
    by two statements for the whole batch (issue 9: per-row INSERTs and two statements a sandbox
    were most of the writer's time). The rows must be what the INSERT stored, column by column:
    JSON bodies as JSON (a rendered answer as it is), text bodies as JSON strings, an empty body
    as JSON `null` (not SQL NULL), `truncated`, `created_at`, and `seq` in queue order per sandbox
    across interleaved sandboxes, continuing from the previous batch's. A row the database
    refuses (an unknown sandbox) fails the COPY; the batch is then stored one event at a time and
    only that event is lost."""
    from sqlalchemy import event as sa_event
    from sqlalchemy import text

    boxes = [_fhir_sandbox(server, api) for _ in range(3)]
    engine = server.database.engine
    events.flush_events(engine)
    log = events._log_of(engine)
    bodies: list[tuple[bytes, bytes, bool]] = [
        (b"", b"", False),
        (b'{"resourceType": "Patient", "name": [{"family": "\\u00dcnal"}]}', '{"total":1,"x":"Ünal\\t\\\\"}'.encode(), True),
        (b"name=a\tb\\c", b"not json", False),
        (b"", b'{"n": NaN}', False),  # not strict JSON: stored as text
        (b"x" * (events.MAX_BODY + 10), b"[1, 2]", False),  # cut: truncated
        (b"[]", b"", True),
    ]  # fmt: skip

    def batch(tag: str, gone: int | None = None) -> list[events._Queued]:
        queued = []
        for n in range(12):
            org_id, box = boxes[n % 3]
            request, response, rendered = bodies[n % len(bodies)]
            queued.append(
                events._new(org_id, "sbx_gone" if n == gone else box, "fhir_request",
                            {"method": "GET", "path": f"/{tag}/{n}", "status": 200, "request": request,
                             "response": response, "response_json": rendered})
            )  # fmt: skip
        return queued

    def stored(tag: str) -> list[tuple[Any, ...]]:
        with engine.connect() as conn:
            return [
                tuple(row)
                for row in conn.execute(
                    text(
                        "SELECT sandbox_id, seq, path, status, truncated, created_at, "
                        "request IS NULL, response IS NULL, CAST(request AS TEXT), CAST(response AS TEXT) "
                        "FROM sandbox_events WHERE path LIKE :tag ORDER BY sandbox_id, seq"
                    ),
                    {"tag": f"/{tag}/%"},
                )
            ]

    copies: list[int] = []
    _count_copies(monkeypatch, copies)
    statements: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    with monkeypatch.context() as inserting:  # the INSERT, as before COPY
        inserting.setattr(event_rows, "_copies", lambda _dialect, _rows: False)
        before = batch("insert")
        log._write(before)
    assert copies == []
    after = batch("copy")
    sa_event.listen(engine, "before_cursor_execute", note)
    try:
        log._write(after)
    finally:
        sa_event.remove(engine, "before_cursor_execute", note)
    inserted, copied = stored("insert"), stored("copy")
    if server.database.is_sqlite:
        assert copies == []
    else:
        assert copies == [12]
        # Not two a sandbox: one lock and one read of the last events for the batch.
        assert sum("LATERAL" in s for s in statements) == 1, statements
        assert not any("sandbox_events.sandbox_id = %(sandbox_id)s" in s for s in statements), statements
    assert len(inserted) == len(copied) == 12
    by_queue = {event.path: event for event in before + after}
    for old, new in zip(inserted, copied, strict=True):
        assert old[0] == new[0] and new[1] == old[1] + 4, "seq goes on from the previous batch"
        assert old[3:5] + old[6:] == new[3:5] + new[6:], (old, new)
    for row in inserted + copied:
        queued = by_queue[row[2]]
        at = row[5] if isinstance(row[5], datetime) else datetime.fromisoformat(row[5])  # SQLite: text
        assert at.replace(tzinfo=None) == queued.created_at.replace(tzinfo=None)
    for tag, rows in (("insert", inserted), ("copy", copied)):
        for box_index, (_org, box) in enumerate(boxes):
            mine = [row for row in rows if row[0] == box]
            assert [row[2] for row in mine] == [f"/{tag}/{n}" for n in range(box_index, 12, 3)]
    listed = ok(api.get(f"/sandboxes/{boxes[1][1]}/events", params={"limit": 100}))["data"]
    assert [e["path"] for e in listed] == [f"/{tag}/{n}" for tag in ("insert", "copy") for n in (1, 4, 7, 10)]
    for event in listed:
        n = int(event["path"].rsplit("/", 1)[1])
        assert event["truncated"] is (n % len(bodies) == 4)
        if n % len(bodies) == 1:
            assert event["request"] == {"resourceType": "Patient", "name": [{"family": "Ünal"}]}
            assert event["response"] == {"total": 1, "x": "Ünal\t\\"}
        if n % len(bodies) == 4:
            assert event["request"] == "x" * events.MAX_BODY and event["response"] == [1, 2]
    null_rows = [row for row in copied if int(row[2].rsplit("/", 1)[1]) % len(bodies) == 0]
    assert null_rows and all(row[6:] == (False, False, "null", "null") for row in null_rows)
    text_rows = [row for row in copied if int(row[2].rsplit("/", 1)[1]) % len(bodies) == 2]
    assert text_rows and all(json.loads(row[8]) == "name=a\tb\\c" for row in text_rows)

    # One refused row: the COPY fails, the others are stored one by one, in order.
    copies.clear()
    log._write(batch("bad", gone=5))
    refused = stored("bad")
    assert [row[2] for row in refused if row[0] == boxes[2][1]] == ["/bad/2", "/bad/8", "/bad/11"]
    assert sorted(row[2] for row in refused) == sorted(f"/bad/{n}" for n in range(12) if n != 5)
    for _org, box in boxes:
        seqs = [row[1] for row in refused if row[0] == box]
        assert seqs == list(range(9, 9 + len(seqs)))
    if not server.database.is_sqlite:
        assert copies == [12], "the batch went by COPY, then one INSERT an event"
