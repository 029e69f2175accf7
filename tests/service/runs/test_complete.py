"""`complete`: scoring of seed 001 (weights, axes, exact 0.9), scored-run elision, idempotence
under 20 concurrent calls, rescore."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.service.builders import FAILS, PASSES, criterion, make_benchmark, ok, start_run
from tests.service.conftest import Server


def _complete(
    server: Server, api: httpx.Client, benchmark_id: str, *, scored: bool = False
) -> tuple[str, dict]:
    run = start_run(api, benchmark_id, scored=scored)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
        return task_run_id, ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))


def test_nine_of_ten_is_a_pass(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(
        api, [[criterion(PASSES, weight=0.1) for _ in range(9)] + [criterion(FAILS, weight=0.1)]]
    )
    _, result = _complete(server, api, catalog.benchmark_id)
    assert result["score"] == 0.9 and result["verdict"] == "pass"
    assert result["axes"] == {"__default__": {"score": 0.9, "weight": 1}}


def test_weights_and_axes(server: Server, api: httpx.Client) -> None:
    criteria = [
        criterion(PASSES, weight=3, axis="correctness"),
        criterion(FAILS, weight=1, axis="correctness"),
        criterion(PASSES, weight=0.5, axis="safety"),
        criterion(FAILS, weight=1.5, axis="efficiency"),
    ]
    catalog = make_benchmark(api, [criteria, [criterion(FAILS)]])
    run = start_run(api, catalog.benchmark_id)
    with server.client(run.token) as agent:
        results = []
        for task_run in run.task_runs:
            ok(agent.post(task_run["start_url"]))
            results.append(ok(agent.post(task_run["complete_url"])))
        summary = ok(agent.get(f"/v1/benchmark-runs/{run.id}"))
    first, second = results
    assert first["score"] == 3.5 / 6 and first["verdict"] == "partial"
    assert first["axes"] == {
        "correctness": {"score": 0.75, "weight": 4},
        "safety": {"score": 1.0, "weight": 0.5},
        "efficiency": {"score": 0.0, "weight": 1.5},
    }
    assert second["score"] == 0.0 and second["verdict"] == "fail"
    assert summary["score"] == (3.5 / 6) / 2 and summary["verdict"] == "partial"
    assert [tr["status"] for tr in summary["task_runs"]] == ["completed", "completed"]


def test_scored_runs_hide_details_and_evidence(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES), criterion(FAILS)]])
    task_run_id, result = _complete(server, api, catalog.benchmark_id, scored=True)
    for check in result["checks"]:
        assert set(check) == {"criterion_id", "label", "axis", "weight", "status", "passed", "score"}
    for summary in ok(api.get(f"/task-runs/{task_run_id}"))["criterion_runs"]:
        record = ok(api.get(f"/criterion-runs/{summary['id']}"))
        assert record["details"] and "phraseResults" in record["evidence"]
    _, unscored = _complete(server, api, catalog.benchmark_id)
    assert all("details" in check and "evidence" in check for check in unscored["checks"])


def test_twenty_concurrent_completes_write_one_set(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES), criterion(FAILS), criterion(PASSES, axis="x")]])
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))

        def complete(_: int) -> tuple[int, dict]:
            with server.client(run.token) as client:
                response = client.post(f"/v1/task-runs/{task_run_id}/complete")
                return response.status_code, response.json()

        with ThreadPoolExecutor(20) as pool:
            outcomes = list(pool.map(complete, range(20)))
        again = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    assert {status for status, _ in outcomes} == {200}
    assert all(body == outcomes[0][1] for _, body in outcomes) and again == outcomes[0][1]
    runs = ok(api.get("/criterion-runs", params={"task_run_id": task_run_id, "limit": 100}))["data"]
    assert len(runs) == 3


def test_rescore_supersedes_and_refinalizes(server: Server, api: httpx.Client) -> None:
    catalog = make_benchmark(api, [[criterion(PASSES), criterion(FAILS)]])
    task_run_id, first = _complete(server, api, catalog.benchmark_id)
    rescored = ok(api.post(f"/task-runs/{task_run_id}/rescore"))
    assert rescored["score"] == first["score"] == 0.5 and rescored["checks"] == first["checks"]
    runs = ok(api.get("/criterion-runs", params={"task_run_id": task_run_id}))["data"]
    assert len(runs) == 4 and sorted(run["superseded"] for run in runs) == [False, False, True, True]
    current = ok(api.get(f"/task-runs/{task_run_id}"))["criterion_runs"]
    assert {run["id"] for run in current} == {run["id"] for run in runs if not run["superseded"]}


def test_complete_reads_only_the_surfaces_its_criteria_ask_about(server: Server, api: httpx.Client) -> None:
    """A capture's surface views are read when a criterion first asks for one (issue 9: reading all
    six for every `complete` was a third of its SQL): voice-only criteria read no portal, HL7, X12
    or FHIR tables, and still score as before."""
    from sqlalchemy import event

    catalog = make_benchmark(api, [[criterion(PASSES), criterion(FAILS)]])
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
        event.listen(server.database.engine, "before_cursor_execute", seen)
        try:
            result = ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
        finally:
            event.remove(server.database.engine, "before_cursor_execute", seen)
    assert result["score"] == 0.5
    assert any("voice_turns" in s for s in statements)
    unread = ("portal_versions", "hl7_messages", "x12_exchanges", "fhir_versions", "fhir_layer_resources")
    reads = [s for s in statements if "max(" not in s and any(f"FROM {table}" in s for table in unread)]
    assert not reads, reads  # (the capture itself takes each store's last sequence number)


def test_a_worker_hands_the_gil_over_within_half_a_millisecond(server: Server) -> None:
    """The app's lifespan shortens the switch interval (service/priority.py): under agent load the
    event loop holds the GIL, and a `complete` thread waited up to 5 ms for it after each SQLite
    statement (125–150 ms p50 under 16 clients)."""
    import sys

    from assay.service.priority import SWITCH_INTERVAL

    assert SWITCH_INTERVAL <= 0.0005
    assert sys.getswitchinterval() == SWITCH_INTERVAL
