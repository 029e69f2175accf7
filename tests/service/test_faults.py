"""`kill -9` during bursts of `start`, FHIR writes and `complete`, then a restart on the same
database (issue 9): nothing is half-written, and the server serves normally.

The server is killed (its whole process group, SIGKILL) while many `start`, FHIR-write and
`complete` requests are in flight — once a few `complete`s have been answered, so others are
mid-flight — and started again on the same data dir and database. Then the database is checked
with the queries a person would write (`_INVARIANTS`): a completed task run has a criterion run
for every criterion, a score and its captured state; a task run that did not complete has no
criterion runs; a started one has its playground; benchmark runs are final exactly when all their
task runs ended, with the mean of their scores, and their counters agree with their task runs;
each FHIR store's sequence number is its last version's; event sequences have no gaps. Task runs left `started` get the spec's treatment: the
agent can still `complete` them after the restart, and the sweeper ends those whose deadline
passed (here: moved into the past while the server was down) as `timed_out`, score 0, with no
criterion runs. Bounded waits only; nothing is timed.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from assay.store import sqlite_url

from .builders import NOTE_WRITTEN, PASSES, ok, one_patient_bundle
from .processes import Served, free_port, start_serve, stop

Json = dict[str, Any]
RUNS = 6
"""Benchmark runs per burst, each with two task runs started and completed at once."""
KILL_AFTER_COMPLETES = 3
"""The kill comes once this many `complete`s have been answered: the others are in flight."""

BUNDLE = one_patient_bundle("Fault")
_INVARIANTS = {
    "benchmark run whose counters disagree with its task runs": """
        SELECT br.id FROM benchmark_runs br
        WHERE br.task_runs_total <> (SELECT count(*) FROM task_runs tr WHERE tr.benchmark_run_id = br.id)
           OR br.task_runs_ended <> (SELECT count(*) FROM task_runs tr WHERE tr.benchmark_run_id = br.id
                AND tr.status IN ('completed', 'cancelled', 'failed', 'timed_out'))
           OR br.task_runs_running <> (SELECT count(*) FROM task_runs tr WHERE tr.benchmark_run_id = br.id
                AND tr.phase = 'started' AND tr.status = 'active')""",
    "completed task run without a criterion run for every criterion": """
        SELECT tr.id FROM task_runs tr
        WHERE tr.status = 'completed'
          AND (SELECT count(*) FROM criterion_runs cr WHERE cr.task_run_id = tr.id AND NOT cr.superseded)
           <> (SELECT count(*) FROM criteria c WHERE c.task_id = tr.task_id)""",
    "completed task run without score, verdict or completion time": """
        SELECT id FROM task_runs
        WHERE status = 'completed' AND (score IS NULL OR verdict IS NULL OR completed_at IS NULL)""",
    "completed task run without its captured state": """
        SELECT id FROM task_runs WHERE status = 'completed' AND capture IS NULL""",
    "sandbox whose event sequence has a gap or a repeat": """
        SELECT sandbox_id FROM sandbox_events
        GROUP BY sandbox_id HAVING count(*) <> max(seq) OR count(DISTINCT seq) <> count(*)""",
    "criterion runs of a task run that did not complete": """
        SELECT DISTINCT tr.id FROM criterion_runs cr JOIN task_runs tr ON tr.id = cr.task_run_id
        WHERE tr.status <> 'completed'""",
    "ended task run (timed out, cancelled, failed) with a non-zero score": """
        SELECT id FROM task_runs
        WHERE status IN ('timed_out', 'cancelled', 'failed') AND (score IS NULL OR score <> '0')""",
    "started task run without playground, start time or deadline": """
        SELECT id FROM task_runs
        WHERE phase = 'started' AND (playground_id IS NULL OR started_at IS NULL OR deadline_at IS NULL)""",
    "started task run whose playground is missing or not active": """
        SELECT tr.id FROM task_runs tr LEFT JOIN playgrounds p ON p.id = tr.playground_id
        WHERE tr.phase = 'started' AND (p.id IS NULL OR p.status <> 'active')""",
    "ended task run whose playground or sandboxes are not torn down": """
        SELECT tr.id FROM task_runs tr JOIN playgrounds p ON p.id = tr.playground_id
        WHERE tr.phase = 'completed'
          AND (p.status <> 'torn_down'
               OR EXISTS (SELECT 1 FROM sandboxes s WHERE s.playground_id = p.id AND s.status <> 'torn_down'))""",
    "playground of a task run that never started": """
        SELECT p.id FROM playgrounds p JOIN task_runs tr ON tr.id = p.task_run_id WHERE tr.phase = 'created'""",
    "completed benchmark run with a task run not ended": """
        SELECT DISTINCT br.id FROM benchmark_runs br JOIN task_runs tr ON tr.benchmark_run_id = br.id
        WHERE br.phase = 'completed' AND tr.phase <> 'completed'""",
    "benchmark run not final although every task run ended": """
        SELECT br.id FROM benchmark_runs br
        WHERE br.phase <> 'completed'
          AND NOT EXISTS (SELECT 1 FROM task_runs tr WHERE tr.benchmark_run_id = br.id AND tr.phase <> 'completed')""",
    "completed benchmark run without score or verdict": """
        SELECT id FROM benchmark_runs WHERE phase = 'completed' AND (score IS NULL OR verdict IS NULL)""",
    "FHIR dataset layer with fewer or more resources than it says": """
        SELECT l.hash FROM fhir_layers l
        WHERE l.resource_count <> (SELECT count(*) FROM fhir_layer_resources r WHERE r.layer_hash = l.hash)""",
    "FHIR store whose sequence number is not its last version's": """
        SELECT s.id FROM fhir_stores s
        WHERE s.seq <> COALESCE((SELECT max(v.seq) FROM fhir_versions v WHERE v.store_id = s.id), 0)""",
    "FHIR store with a gap in its version sequence": """
        SELECT s.id FROM fhir_stores s
        WHERE (SELECT count(*) FROM fhir_versions v WHERE v.store_id = s.id) <> s.seq""",
}


def _check_database(url: str) -> dict[str, int]:
    """Every invariant holds; the task runs by status (for the caller's own checks).

    All of it is read in one snapshot. On PostgreSQL the test has a database of its own
    (`_own_postgres_database`): these checks read every row, and on the session's shared database
    other tests' rows broke them in CI without any fault of the kill — a completed benchmark run
    with no task runs (a benchmark without tasks; KeyError, twice), and once a completed task run
    with fewer criterion runs than its task has criteria (another test's run, by its id's time; the
    likely cause, a criterion added to a draft task after its run completed, was not reproduced)."""
    postgres = url.startswith("postgresql")
    engine = create_engine(url, isolation_level="REPEATABLE READ") if postgres else create_engine(url)
    try:
        with engine.connect() as conn:
            broken = {
                name: [row[0] for row in conn.execute(text(query))] for name, query in _INVARIANTS.items()
            }
            # The benchmark run's aggregate is the mean of its task runs' scores (exact fractions);
            # a run with no task runs completes at 0.
            scores: dict[str, list[Fraction]] = {}
            for run_id, score in conn.execute(
                text("SELECT benchmark_run_id, score FROM task_runs ORDER BY benchmark_run_id")
            ):
                scores.setdefault(run_id, []).append(Fraction(score or 0))
            for run_id, score in conn.execute(
                text("SELECT id, score FROM benchmark_runs WHERE phase = 'completed'")
            ):
                mine = scores.get(run_id, [])
                mean = sum(mine, Fraction(0)) / len(mine) if mine else Fraction(0)
                if Fraction(score) != mean:
                    broken.setdefault("benchmark run score is not the mean of its task runs", []).append(
                        run_id
                    )
            statuses = dict(
                conn.execute(text("SELECT phase || '/' || status, count(*) FROM task_runs GROUP BY 1")).all()
            )
    finally:
        engine.dispose()
    assert not {name: ids for name, ids in broken.items() if ids}
    return {str(k): int(v) for k, v in statuses.items()}


def _catalog(api: httpx.Client) -> str:
    tag = uuid.uuid4().hex[:8]
    dataset = ok(api.post("/datasets", json={"name": f"ehr {tag}", "type": "fhir", "data": BUNDLE}), 201)
    benchmark = ok(api.post("/benchmarks", json={"name": f"faults {tag}", "concurrency": 2}), 201)
    for name in ("first", "second"):
        task = ok(
            api.post(
                "/tasks", json={"benchmark_id": benchmark["id"], "name": name, "dataset_ids": [dataset["id"]]}
            ),
            201,
        )
        for label, assertion in (("note", NOTE_WRITTEN), ("no SSN", PASSES)):
            ok(
                api.post("/criteria", json={"task_id": task["id"], "label": label, "assertion": assertion}),
                201,
            )
    return str(benchmark["id"])


def _note() -> Json:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "urn:test", "code": "note"}]},
        "subject": {"reference": "Patient/p1"},
    }


async def _burst(served: Served, runs: list[Json]) -> None:
    """Start, write and complete every task run of `runs` at once; SIGKILL the server's process
    group once `KILL_AFTER_COMPLETES` completes are answered (or when everything was answered)."""
    answered = asyncio.Event()
    completes = 0
    flight = Counter[str]()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=served.url, timeout=30, limits=limits) as client:

        async def play(i: int, run: Json, task_run: Json) -> None:
            nonlocal completes
            agent = {"Authorization": f"Bearer {run['bearer_token']}"}
            for _ in range(i % 6):  # staggered: some `start`s are still in flight when the kill comes
                await client.get("/healthz")
            flight["start"] += 1
            started = await client.post(task_run["start_url"], headers=agent)
            flight["start"] -= 1
            if started.status_code != 200:
                return
            fhir = f"/v1/task-runs/{task_run['id']}/fhir"
            flight["write"] += 3
            await asyncio.gather(
                *(client.post(f"{fhir}/Observation", json=_note(), headers=agent) for _ in range(3))
            )
            flight["write"] -= 3
            flight["complete"] += 1
            done = await client.post(task_run["complete_url"], headers=agent)
            flight["complete"] -= 1
            if done.status_code == 200:
                completes += 1
                if completes >= KILL_AFTER_COMPLETES:
                    answered.set()

        async def everything() -> None:
            await asyncio.gather(
                *(play(i, run, tr) for i, (run, tr) in enumerate(_task_runs(runs))),
                return_exceptions=True,
            )
            answered.set()

        players = asyncio.ensure_future(everything())
        await answered.wait()
        stop(served, hard=True)  # kill -9, mid-burst
        print("in flight at the kill:", dict(flight))
        await asyncio.wait_for(players, 60)  # the requests in flight fail fast: their sockets are closed


def _task_runs(runs: list[Json]) -> list[tuple[Json, Json]]:
    return [(run, task_run) for run in runs for task_run in run["task_runs"]]


def _restart(data_dir: Path, database_url: str | None, key: str) -> Served:
    return start_serve(data_dir, database_url=database_url, key=key)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_kill_9_mid_burst_leaves_nothing_half_written(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    database_url = request.getfixturevalue("_own_postgres_database") if backend == "postgres" else None
    data_dir = tmp_path / "data"
    check_url = database_url or sqlite_url(data_dir)
    key = "vk_faults_" + uuid.uuid4().hex
    served = _restart(data_dir, database_url, key)
    org = {"Authorization": f"Bearer {key}"}
    played: list[Json] = []
    try:
        for _round in range(2):
            with httpx.Client(base_url=served.url, headers=org, timeout=60) as api:
                benchmark_id = _catalog(api)
                runs = [
                    ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id}), 201)
                    for _ in range(RUNS)
                ]
            played += runs
            asyncio.run(_burst(served, runs))
            assert served.process.poll() is not None
            after_kill = _check_database(check_url)  # as the kill left it
            print("after the kill:", after_kill)
            served = _restart(data_dir, database_url, key)
            _check_database(check_url)  # and as the restarted server's start-up left it
        _recover(served, played, check_url)
        # Only this test's task runs (the database is its own, but say so in the check).
        ours = {task_run["id"] for run in played for task_run in run["task_runs"]}
        left = _phases(check_url, ours)
        assert set(left) == {"completed"}, left
        _check_database(check_url)
    finally:
        stop(served, hard=True)


def _recover(served: Served, runs: list[Json], check_url: str) -> dict[str, int]:
    """After the restart: half the task runs left started have their deadline pass (the sweeper
    ends them, untouched), the others are completed by their agent; never-started ones run whole."""
    task_runs = {tr["id"]: (run, tr) for run in runs for tr in run["task_runs"]}
    engine = create_engine(check_url)
    try:
        with engine.begin() as conn:
            stuck = sorted(
                row[0]
                for row in conn.execute(text("SELECT id FROM task_runs WHERE phase = 'started'"))
                if row[0] in task_runs
            )
            overdue = stuck[::2]
            past = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=1)
            for ident in overdue:
                conn.execute(
                    text("UPDATE task_runs SET deadline_at = :past WHERE id = :id"),
                    {"past": past, "id": ident},
                )
        for _ in range(300):  # the sweeper runs every 0.2 s; bounded
            with engine.connect() as conn:
                phases = [
                    conn.execute(text("SELECT phase FROM task_runs WHERE id = :id"), {"id": i}).scalar()
                    for i in overdue
                ]
            if "started" not in phases:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the sweeper did not end the overdue task runs: {phases}")
        with engine.connect() as conn:
            for ident in overdue:
                status, score, crs = conn.execute(
                    text(
                        "SELECT status, score, (SELECT count(*) FROM criterion_runs WHERE task_run_id = :id) "
                        "FROM task_runs WHERE id = :id"
                    ),
                    {"id": ident},
                ).one()
                assert (status, score, crs) == ("timed_out", "0", 0), (ident, status, score, crs)
    finally:
        engine.dispose()
    with httpx.Client(base_url=served.url, timeout=60) as client:
        for ident, (run, task_run) in task_runs.items():
            agent = {"Authorization": f"Bearer {run['bearer_token']}"}
            detail = client.get(f"/v1/task-runs/{ident}", headers=agent)
            phase = ok(detail)["phase"]
            if phase == "created":
                ok(client.post(task_run["start_url"], headers=agent))
            if phase != "completed":
                assert (
                    client.post(
                        f"/v1/task-runs/{ident}/fhir/Observation", json=_note(), headers=agent
                    ).status_code
                    == 201
                )
            completed = ok(client.post(task_run["complete_url"], headers=agent))
            assert completed["phase"] == "completed", completed
            if completed["status"] == "completed":
                assert [c["passed"] for c in completed["checks"]] == [True, True], completed
    return _check_database(check_url)


def _phases(check_url: str, task_run_ids: set[str]) -> Counter[str]:
    """How many of these task runs are in each phase."""
    engine = create_engine(check_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, phase FROM task_runs"))
            return Counter(phase for ident, phase in rows if ident in task_run_ids)
    finally:
        engine.dispose()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_killing_serve_alone_stops_its_workers_and_listener_process(tmp_path: Path) -> None:
    """`kill -9` of the `serve` process only (not its group): its workers and its listener process
    stop by themselves (`service/orphans.py`), so the API and listener ports are free again and a
    restart on the same ports comes up. Before, the orphans kept serving and holding the ports."""
    key = "vk_orphans_" + uuid.uuid4().hex
    ports = {"ASSAY_MLLP_PORT": str(free_port()), "ASSAY_SFTP_PORT": str(free_port())}
    served = start_serve(tmp_path / "data", database_url=None, key=key, workers=2, env=ports)
    try:
        served.process.kill()  # SIGKILL to the supervisor alone
        served.process.wait(timeout=30)
        watched = [served.port, *map(int, ports.values())]
        for _ in range(600):  # the orphans look at their parent every second; bounded
            still = [port for port in watched if _listening(port)]
            if not still:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"ports still served after the supervisor died: {still}")
        again = start_serve(
            tmp_path / "data", database_url=None, key=key, workers=2, env=ports, port=served.port
        )
        try:
            assert httpx.get(f"{again.url}/healthz", timeout=30).status_code == 200
        finally:
            stop(again)
    finally:
        stop(served, hard=True)
