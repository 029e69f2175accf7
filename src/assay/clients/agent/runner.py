"""`assay agent run`: the reference agent over a whole benchmark.

One benchmark run of `benchmark` (`slug@version`) with `trials` trials of each task; its task
runs are worked `concurrency` at a time, each started, worked by the loop (`loop.py`) and
completed here. The summary is the run's own statistics (mean score, 95% interval, pass@k and
pass^k, docs/scoring.md) with the viewer's links.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from assay.clients.agent.loop import AgentLimits, AgentResult, ModelEndpoint, work_task_run

__all__ = ["RunSummary", "TaskOutcome", "run_benchmark"]


@dataclass
class TaskOutcome:
    task_run_id: str
    name: str
    trial: int
    score: float | None = None
    verdict: str | None = None
    agent: AgentResult | None = None
    error: str | None = None


@dataclass
class RunSummary:
    benchmark_run_id: str
    score: float | None
    verdict: str | None
    statistics: dict[str, Any]
    outcomes: list[TaskOutcome] = field(default_factory=list)
    viewer: str = ""
    workers: int = 1
    """Task runs worked at once: the asked concurrency, capped by the benchmark's."""

    def task_link(self, base_url: str, task_run_id: str) -> str:
        return f"{base_url.rstrip('/')}/ui/task-runs/{task_run_id}"


def _work_one(
    base_url: str,
    token: str,
    endpoint: ModelEndpoint,
    limits: AgentLimits,
    outcome: TaskOutcome,
) -> TaskOutcome:
    headers = {"Authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=base_url, headers=headers, timeout=60) as assay,
        httpx.Client(timeout=limits.max_seconds) as model,
    ):
        try:
            started = assay.post(f"/v1/task-runs/{outcome.task_run_id}/start")
            if started.status_code != 200:
                outcome.error = f"start answered {started.status_code}: {started.text[:300]}"
            else:
                outcome.agent = work_task_run(
                    assay, model, endpoint, outcome.task_run_id, started.json()["task"], limits
                )
        except httpx.HTTPError as failed:  # the service went away mid-task: completed below if it can be
            outcome.error = f"{type(failed).__name__}: {failed}"
        done = assay.post(f"/v1/task-runs/{outcome.task_run_id}/complete")
        if done.status_code == 200:
            outcome.score, outcome.verdict = done.json().get("score"), done.json().get("verdict")
        elif outcome.error is None:
            outcome.error = f"complete answered {done.status_code}: {done.text[:300]}"
    return outcome


def run_benchmark(
    base_url: str,
    api_key: str,
    benchmark: str,
    endpoint: ModelEndpoint,
    limits: AgentLimits,
    *,
    concurrency: int = 1,
    trials: int = 1,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[TaskOutcome], None] | None = None,
) -> RunSummary:
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=120) as org:
        agent = {"name": "assay agent", "model": endpoint.model}
        created = org.post(
            "/v1/benchmark-runs", json={"benchmark": benchmark, "trials": trials, "agent": agent}
        )
        if created.status_code != 201:
            raise RuntimeError(f"the benchmark run was refused ({created.status_code}): {created.text[:500]}")
        run = created.json()
        run_id, token = run["benchmark_run_id"], run["bearer_token"]
        seen: dict[str, int] = {}
        outcomes = []
        for task_run in run["task_runs"]:  # in position order: a task's trials one after the other
            seen[task_run["task_id"]] = seen.get(task_run["task_id"], 0) + 1
            outcomes.append(TaskOutcome(task_run["id"], task_run["name"], seen[task_run["task_id"]]))
        if on_start is not None:
            on_start(len(outcomes))
        lock = threading.Lock()

        def work(outcome: TaskOutcome) -> TaskOutcome:
            finished = _work_one(base_url, token, endpoint, limits, outcome)
            if on_done is not None:
                with lock:
                    on_done(finished)
            return finished

        # The benchmark caps how many of its task runs may be started at once: more workers would
        # only be refused (409) at `start`.
        allowed = org.get(f"/benchmark-runs/{run_id}").json().get("concurrency") or concurrency
        workers = max(1, min(concurrency, int(allowed)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="assay-agent") as pool:
            list(pool.map(work, outcomes))
        body = org.get(f"/benchmark-runs/{run_id}").json()
    return RunSummary(
        run_id,
        body.get("score"),
        body.get("verdict"),
        body.get("statistics") or {},
        outcomes,
        f"{base_url.rstrip('/')}/ui/runs/{run_id}",
        workers,
    )
