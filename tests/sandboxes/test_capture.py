"""`complete` pins the FHIR store with one read of its row (SPEC §6: the capture is a pointer, the
store id and its sequence number). Capture asked whether the store existed, then read its
sequence under the lock, and scoring the capture (`state_at`) refreshed the index, which read the
sequence again: three queries of `fhir_stores` where the locked read answers all."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import Engine, event

from tests.service.builders import make_benchmark, ok, start_run
from tests.service.conftest import Server

_STORE_ROW_READ = re.compile(r"^\s*SELECT\b.*\bFROM fhir_stores\b", re.DOTALL)


@contextmanager
def _executed(engine: Engine, pattern: re.Pattern[str]) -> Iterator[list[str]]:
    """The statements matching `pattern` that `engine` runs inside the block."""
    matched: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        matched.extend([statement] if pattern.match(statement) else [])

    event.listen(engine, "before_cursor_execute", seen)
    try:
        yield matched
    finally:
        event.remove(engine, "before_cursor_execute", seen)


def test_complete_reads_the_fhir_store_row_once(server: Server, api: httpx.Client) -> None:
    criterion = {"label": "p", "assertion": {"assert": "fhir-resource-state", "resource_type": "Patient"}}
    run = start_run(api, make_benchmark(api, [[criterion]]).benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        fhir = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        ok(agent.post(f"{fhir}/Patient", json={"resourceType": "Patient"}), 201)
        with _executed(server.database.engine, _STORE_ROW_READ) as reads:
            completed = ok(agent.post(task_run["complete_url"]))
    assert completed["score"] == 1.0
    assert len(reads) == 1, reads
