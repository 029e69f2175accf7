"""Rendered search answers kept per store state (issue 9, `sandboxes/fhir/answers.py`): a repeated
search is answered from the worker's cache with the very bytes it answered before, and nothing
that changes the answer — a write, in this worker or another, the base URL, `Prefer: handling`
— is ever answered from an older entry."""

from __future__ import annotations

import httpx

from assay.sandboxes.fhir import EmbeddedFhir
from assay.sandboxes.fhir.answers import MAX_ANSWER_BYTES, SearchAnswers
from assay.sandboxes.fhir.store import embedded_fhir
from assay.store import Database

from .builders import make_benchmark, ok, start_run
from .conftest import Server


def test_a_repeated_search_is_the_same_bytes_and_a_write_anywhere_is_seen_at_once(
    server: Server, api: httpx.Client
) -> None:
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    base = f"/v1/task-runs/{task_run_id}/fhir"
    answers = embedded_fhir(server.database.engine).answers
    with server.client(run.token) as agent:
        playground_id = ok(agent.post(run.task_runs[0]["start_url"]))["playground_id"]
        patient = {"resourceType": "Patient", "name": [{"family": "Answered"}]}
        ok(agent.post(f"{base}/Patient", json=patient), 201)
        first = agent.get(f"{base}/Patient", params={"family": "Answered"})
        hits = answers.hits
        again = agent.get(f"{base}/Patient", params={"family": "Answered"})
        assert (
            again.content == first.content and again.headers["content-type"] == first.headers["content-type"]
        )
        assert answers.hits == hits + 1, "the second search was answered from the cache"
        assert ok(again)["total"] == 1

        ok(agent.post(f"{base}/Patient", json=patient), 201)
        assert ok(agent.get(f"{base}/Patient", params={"family": "Answered"}))["total"] == 2

        # Another worker (its own engine and index, same database) writes: seen by the next search.
        other_worker = Database(server.database.url)
        try:
            with EmbeddedFhir(other_worker.engine).writing(playground_id) as tx:
                tx.put({"resourceType": "Patient", "name": [{"family": "Answered"}]}, "from-elsewhere")
        finally:
            other_worker.dispose()
        found = ok(agent.get(f"{base}/Patient", params={"family": "Answered"}))
        assert found["total"] == 3
        assert "from-elsewhere" in {entry["resource"]["id"] for entry in found["entry"]}

        # The same search under the benchmark run's base: its own links and fullUrls.
        by_run = ok(agent.get(f"/v1/benchmark-runs/{run.id}/fhir/Patient", params={"family": "Answered"}))
        assert all(
            e["fullUrl"].startswith(f"{server.url}/v1/benchmark-runs/{run.id}/fhir/") for e in by_run["entry"]
        )


def test_a_lenient_answer_is_never_given_to_a_strict_search(server: Server, api: httpx.Client) -> None:
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    base = f"/v1/task-runs/{run.task_runs[0]['id']}/fhir"
    with server.client(run.token) as agent:
        ok(agent.post(run.task_runs[0]["start_url"]))
        lenient = {"Prefer": "handling=lenient"}
        for _ in range(2):
            assert agent.get(f"{base}/Patient", params={"bogus": "1"}, headers=lenient).status_code == 200
            assert agent.get(f"{base}/Patient", params={"bogus": "1"}).status_code == 400


def test_the_cache_keeps_the_most_recent_answers_within_its_byte_budget() -> None:
    answers = SearchAnswers(max_bytes=300)
    for name in "abc":
        answers.put(name, name.encode() * 100)
    assert answers.held == 300
    assert answers.get("a") == b"a" * 100  # now the most recently used
    answers.put("d", b"d" * 100)
    assert answers.get("b") is None, "the least recently used went first"
    assert [answers.get(k) is not None for k in "acd"] == [True, True, True]
    assert answers.held <= answers.max_bytes
    answers.put("huge", b"x" * (MAX_ANSWER_BYTES + 1))
    assert answers.get("huge") is None, "an answer too large to keep is rendered each time"
