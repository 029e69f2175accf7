"""Many agents on one benchmark run at once: the concurrency limit holds in every committed state,
the run completes once with the exact mean of its task runs, and start and complete lock only
their own task run (a sibling's row lock held elsewhere holds up neither). Migration 0013 counts
the task runs of runs stored before it."""

from __future__ import annotations

import queue
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, func, select, text

import assay.store
from assay.service.runs import states
from assay.store import Database, sqlite_url
from assay.store.models import BenchmarkRun, TaskRun
from tests.service.builders import FAILS, PASSES, criterion, error, make_benchmark, ok, start_run
from tests.service.conftest import Server, serving

_ROUND = [criterion(PASSES)], [criterion(FAILS)], [criterion(PASSES)]


def _rows(server: Server, run_id: str) -> tuple[BenchmarkRun, list[TaskRun]]:
    with server.database.reading() as session:
        run = session.get(BenchmarkRun, run_id)
        assert run is not None
        task_runs = list(session.scalars(select(TaskRun).where(TaskRun.benchmark_run_id == run_id)))
        session.expunge_all()
    return run, task_runs


def _running_now(server: Server, run_id: str) -> tuple[int, int]:
    """Task runs started and not ended, and the run's slot counter, in one committed snapshot."""
    started = (
        select(func.count())
        .select_from(TaskRun)
        .where(
            TaskRun.benchmark_run_id == run_id,
            TaskRun.phase == states.STARTED[0],
            TaskRun.status == states.STARTED[1],
        )
        .scalar_subquery()
    )
    statement = select(started, BenchmarkRun.task_runs_running).where(BenchmarkRun.id == run_id)
    with server.database.reading() as session:
        counted, counter = session.execute(statement).one()
    return counted, counter


def _assert_final(server: Server, run_id: str, total: int) -> None:
    run, task_runs = _rows(server, run_id)
    assert len(task_runs) == total
    assert all(task_run.status == "completed" for task_run in task_runs)
    mean = sum((Fraction(task_run.score or 0) for task_run in task_runs), Fraction(0)) / total
    assert (run.phase, run.status, Fraction(run.score or "-1")) == ("completed", "completed", mean)
    assert (run.task_runs_total, run.task_runs_ended, run.task_runs_running) == (total, total, 0)
    assert run.completed_at is not None
    assert run.completed_at >= max(task_run.completed_at for task_run in task_runs if task_run.completed_at)


def test_agents_racing_never_exceed_concurrency_and_the_run_completes_once(
    server: Server, api: httpx.Client
) -> None:
    """Eight agents share twelve task runs under a limit of three, half of them through a second
    server on the same database (another instance): each takes the next task run, retries its
    start while the run is full, completes it. A watcher reads committed states throughout: never
    more than three started, and the slot counter always equals that count."""
    concurrency, agents = 3, 8
    catalog = make_benchmark(api, list(_ROUND) * 4, concurrency=concurrency)
    run = start_run(api, catalog.benchmark_id)
    todo: queue.Queue[dict[str, Any]] = queue.Queue()
    for task_run in run.task_runs:
        todo.put(task_run)
    seen: list[tuple[int, int]] = []
    failures: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(_running_now(server, run.id))

    def agent(instance: Server) -> None:
        with instance.client(run.token) as client:
            while True:
                try:
                    task_run = todo.get_nowait()
                except queue.Empty:
                    return
                while (started := client.post(task_run["start_url"])).status_code == 409:
                    time.sleep(0.005)
                if started.status_code != 200:
                    failures.append(f"start {started.status_code} {started.text}")
                    return
                completed = client.post(task_run["complete_url"])
                if completed.status_code != 200:
                    failures.append(f"complete {completed.status_code} {completed.text}")
                    return

    with serving(server) as second:
        watcher = threading.Thread(target=watch)
        instances = [server, second] * (agents // 2)
        workers = [threading.Thread(target=agent, args=(instance,)) for instance in instances]
        watcher.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=300)
        done.set()
        watcher.join(timeout=30)
    assert failures == []
    assert seen and max(counted for counted, _ in seen) <= concurrency
    assert all(counted == counter for counted, counter in seen)
    _assert_final(server, run.id, len(run.task_runs))
    assert ok(api.get(f"/benchmark-runs/{run.id}"))["score"] == pytest.approx(2 / 3)


def test_simultaneous_starts_take_exactly_the_free_slots(server: Server, api: httpx.Client) -> None:
    """All not-yet-started task runs are started at the same instant, then the winners complete at
    the same instant, round after round: each round exactly `concurrency` starts win (the rest
    get the 409 naming the started ones) until fewer remain."""
    concurrency = 3
    catalog = make_benchmark(api, list(_ROUND) * 3, concurrency=concurrency)
    run = start_run(api, catalog.benchmark_id)
    remaining = list(run.task_runs)

    def at_once(urls: list[str]) -> list[httpx.Response]:
        barrier = threading.Barrier(len(urls))
        answers: list[httpx.Response | None] = [None] * len(urls)

        def call(i: int) -> None:
            with server.client(run.token) as client:
                barrier.wait()
                answers[i] = client.post(urls[i])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(urls))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert all(answer is not None for answer in answers)
        return answers  # type: ignore[return-value]

    while remaining:
        answers = at_once([task_run["start_url"] for task_run in remaining])
        won = [
            task_run for task_run, answer in zip(remaining, answers, strict=True) if answer.status_code == 200
        ]
        assert len(won) == min(concurrency, len(remaining))
        for answer in answers:
            if answer.status_code != 200:
                details = error(answer, 409, "CONFLICT")
                # the started ones committed when the 409 was written: winners, maybe not all yet
                assert set(details["started_task_run_ids"]) <= {task_run["id"] for task_run in won}
        assert _running_now(server, run.id) == (len(won), len(won))
        assert all(answer.status_code == 200 for answer in at_once([tr["complete_url"] for tr in won]))
        assert _running_now(server, run.id) == (0, 0)
        remaining = [task_run for task_run in remaining if task_run not in won]
    _assert_final(server, run.id, len(run.task_runs))


def test_a_locked_sibling_holds_up_neither_start_nor_complete(server: Server, api: httpx.Client) -> None:
    """Another transaction holds a sibling task run's row lock (as a long `complete` of it would):
    this task run still starts and completes at once, and so does the sweeper's work elsewhere."""
    if server.backend != "postgres":
        pytest.skip("row locks are PostgreSQL's; SQLite transactions are exclusive")
    catalog = make_benchmark(api, [[criterion(PASSES)], [criterion(PASSES)]], concurrency=2)
    run = start_run(api, catalog.benchmark_id)
    mine, sibling = run.task_runs
    holder = create_engine(server.database.engine.url)
    try:
        with holder.connect() as connection, connection.begin():
            connection.execute(
                text("SELECT id FROM task_runs WHERE id = :id FOR UPDATE"), {"id": sibling["id"]}
            )
            with httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {run.token}"}, timeout=10
            ) as agent:
                ok(agent.post(mine["start_url"]))
                ok(agent.post(mine["complete_url"]))
    finally:
        holder.dispose()
    run_row, _ = _rows(server, run.id)
    assert (run_row.phase, run_row.task_runs_ended, run_row.task_runs_running) == ("started", 1, 0)


def test_start_and_complete_read_the_same_rows_in_a_run_of_7_or_350(
    server: Server, api: httpx.Client
) -> None:
    """The task-run rows `start` and `complete` load (or re-read under a lock) do not grow with
    the run: a run of 7 task runs and one of 350 (7 tasks × 50 trials) cost the same."""
    catalog = make_benchmark(api, list(_ROUND) + list(_ROUND) + [[criterion(PASSES)]])
    loaded: list[str] = []

    def count(target: TaskRun, *_args: Any) -> None:
        loaded.append(target.id)

    def rows_for(trials: int) -> int:
        body = {"benchmark_id": catalog.benchmark_id, "trials": trials}
        created = ok(api.post("/v1/benchmark-runs", json=body), 201)
        assert len(created["task_runs"]) == 7 * trials
        task_run = created["task_runs"][-1]
        with server.client(created["bearer_token"]) as agent:
            loaded.clear()
            event.listen(TaskRun, "load", count)
            event.listen(TaskRun, "refresh", count)
            try:
                ok(agent.post(task_run["start_url"]))
                ok(agent.post(task_run["complete_url"]))
            finally:
                event.remove(TaskRun, "load", count)
                event.remove(TaskRun, "refresh", count)
        return len(loaded)

    small, large = rows_for(1), rows_for(50)
    assert large == small <= 6


def test_migration_counts_the_task_runs_of_existing_runs(tmp_path: Path) -> None:
    database = Database(sqlite_url(tmp_path))
    config = Config()
    config.set_main_option("script_location", str(Path(assay.store.__file__).parent / "migrations"))
    try:
        with database.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0012_event_lz4")
        now = "2026-11-27 00:00:00"
        with database.engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO organizations (id, name, is_default, created_at) VALUES ('o', 'o', 0, :now)"
                ),
                {"now": now},
            )
            connection.execute(
                text(
                    "INSERT INTO benchmarks (id, org_id, name, created_at, updated_at) "
                    "VALUES ('b', 'o', 'b', :now, :now)"
                ),
                {"now": now},
            )
            connection.execute(
                text(
                    "INSERT INTO benchmark_runs (id, org_id, benchmark_id, benchmark_ref, scored, phase, "
                    "status, concurrency, trials, token_hash, token_expires_at, created_at) VALUES "
                    "('r', 'o', 'b', '{}', 0, 'started', 'active', 2, 1, 'h', :now, :now)"
                ),
                {"now": now},
            )
            for i, (phase, status) in enumerate(
                [
                    ("completed", "completed"),
                    ("completed", "timed_out"),
                    ("started", "active"),
                    ("created", "active"),
                ]
            ):
                connection.execute(
                    text(
                        "INSERT INTO task_runs (id, org_id, benchmark_run_id, task_id, name, position, trial, "
                        "phase, status, snapshot, entities, timeout_seconds, created_at) VALUES "
                        "(:id, 'o', 'r', 't', 't', :i, 0, :phase, :status, '{}', '{}', 60, :now)"
                    ),
                    {"id": f"tr{i}", "i": i, "phase": phase, "status": status, "now": now},
                )
        database.migrate()
        with database.reading() as session:
            run = session.get(BenchmarkRun, "r")
            assert run is not None
            assert (run.task_runs_total, run.task_runs_ended, run.task_runs_running) == (4, 2, 1)
    finally:
        database.dispose()
