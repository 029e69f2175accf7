"""`start` reads the rows that say which environment a run uses once per unit of work (it read the benchmark
version four times, or the draft's benchmark and environment three times each: the session's
identity map holds rows weakly, so each `session.get` after the previous caller let go re-selected),
and a published version, which never changes, once per worker."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.listening import listening
from tests.service.builders import ok, unique
from tests.service.conftest import Server

_TABLES = re.compile(r"\bFROM (benchmark_versions|benchmarks|environments)\b")


@contextmanager
def _reads(server: Server) -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        match = _TABLES.search(statement)
        if match and statement.lstrip().upper().startswith("SELECT"):
            counts[match.group(1)] += 1

    with listening(server.database.engine, "before_cursor_execute", seen):
        yield counts


@pytest.mark.parametrize("published", [True, False], ids=["published", "draft"])
def test_start_reads_the_run_environment_once(server: Server, api: httpx.Client, published: bool) -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": {"resourceType": "Patient"}}],
    }
    dataset = ok(api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": bundle}), 201)
    environment = ok(
        api.post("/environments", json={"name": unique("e"), "dataset_ids": [dataset["id"]]}), 201
    )
    body = {"name": unique("reads"), "environment_id": environment["id"], "concurrency": 2}
    benchmark = ok(api.post("/benchmarks", json=body), 201)
    ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
    ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "u"}), 201)
    if published:
        slug = ok(api.post(f"/benchmarks/{benchmark['id']}/publish", json={}))["slug"]
        run = ok(api.post("/v1/benchmark-runs", json={"benchmark": slug}), 201)
    else:
        run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    with server.client(run["bearer_token"]) as agent, _reads(server) as counts:
        ok(agent.post(run["task_runs"][0]["start_url"]))
    # A draft's rows may change: once to build the dataset layers before the transaction (holding
    # no lock), once in it. A published version never changes: read once by this worker.
    expected = {"benchmark_versions": 1} if published else {"benchmarks": 2, "environments": 2}
    assert dict(counts) == expected
    if published:
        with server.client(run["bearer_token"]) as agent, _reads(server) as counts:
            ok(agent.post(run["task_runs"][1]["start_url"]))
        assert dict(counts) == {}
