"""Task self-tests: does a task measure what its author meant?

Two trials, each a real benchmark run driven through the service's own public API in-process
(ASGI, no socket), exactly as an agent harness would drive it:

- **idle** — start the task run and complete it with no agent action. Every criterion that passes
  there is flagged unless it says `idle_ok: true`, and the task is flagged when its idle score is
  above 0 (an agent that does nothing must earn nothing; gate a task with a `required` criterion to
  keep an `idle_ok` safety rule from scoring on its own).
- **reference** — when the task has a reference solution: scripted `reference.actions` are replayed
  against a fresh playground, then completed; a `reference.snapshot` (the final state a
  correct agent leaves) is judged offline by the same `verify_task` as `complete` and `assay
  verify`, with the deployment's grading. Either way every criterion must pass.

The trials are ordinary runs (agent `{"name": "assay self-test", "mode": "idle" | "reference"}`),
so their criterion runs, events and state stay inspectable; the rest of each run is cancelled.
No database session is held while the trials run: each inner request takes its own.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI, Response
from starlette.concurrency import run_in_threadpool

from assay.core.errors import SnapshotError
from assay.service.grading import Grading
from assay.service.runs.purge import SELF_TEST_AGENT
from assay.snapshot import open_snapshot_files
from assay.verify import CriterionSpec, verify_task

__all__ = ["SELF_TEST_AGENT", "SelfTest", "refusal_response", "self_test_benchmark", "self_test_task"]


@dataclass(slots=True)
class Trial:
    mode: str
    benchmark_run_id: str | None = None
    task_run_id: str | None = None
    score: float | None = None
    verdict: str | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    snapshot: dict[str, Any] | None = None
    """For a snapshot reference: how many files it has and what the reader could not read."""

    def as_json(self) -> dict[str, Any]:
        return {
            "source": "snapshot"
            if self.snapshot is not None
            else "actions"
            if self.mode == "reference"
            else "idle",
            "snapshot": self.snapshot,
            "benchmark_run_id": self.benchmark_run_id,
            "task_run_id": self.task_run_id,
            "score": self.score,
            "verdict": self.verdict,
            "failure": self.failure,
            "actions": self.actions,
            "checks": self.checks,
        }


@dataclass(slots=True)
class SelfTest:
    task_id: str
    name: str
    idle: Trial
    reference: Trial | None
    problems: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "ok": self.ok,
            "problems": self.problems,
            "idle": self.idle.as_json(),
            "reference": self.reference.as_json() if self.reference else None,
        }


class _Refused(Exception):
    def __init__(self, response: httpx.Response):
        self.response = response


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise _Refused(response)
    body: dict[str, Any] = response.json()
    return body


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:500]


async def _trial(
    client: httpx.AsyncClient, org: Mapping[str, str], task: Mapping[str, Any], mode: str
) -> Trial:
    trial = Trial(mode)
    body = {"benchmark_id": task["benchmark_id"], "agent": {"name": SELF_TEST_AGENT, "mode": mode}}
    created = _ok(await client.post("/v1/benchmark-runs", json=body, headers=org))
    trial.benchmark_run_id = created["benchmark_run_id"]
    token = {"Authorization": f"Bearer {created['bearer_token']}"}
    task_run = next(tr for tr in created["task_runs"] if tr["task_id"] == task["id"])
    trial.task_run_id = task_run["id"]
    try:
        started = await client.post(task_run["start_url"], headers=token)
        if started.status_code >= 400:
            trial.failure = f"start failed: {_message(started)}"
            return trial
        for position, action in enumerate(
            (task.get("reference") or {}).get("actions", []) if mode == "reference" else []
        ):
            trial.actions.append(await _replay(client, token, task_run["id"], position, action))
        completed = _ok(await client.post(task_run["complete_url"], headers=token))
        trial.score, trial.verdict, trial.checks = (
            completed["score"],
            completed["verdict"],
            completed["checks"],
        )
        return trial
    finally:
        await client.post(f"/benchmark-runs/{trial.benchmark_run_id}/cancel", headers=org)


async def _replay(
    client: httpx.AsyncClient,
    token: Mapping[str, str],
    task_run_id: str,
    position: int,
    action: Mapping[str, Any],
) -> dict[str, Any]:
    headers = dict(token)
    content: bytes | None = None
    if action.get("body") is not None:
        content = str(action["body"]).encode()
        headers["Content-Type"] = action.get("content_type") or "text/plain"
    elif "json" in action:
        content = json.dumps(action["json"]).encode()
        headers["Content-Type"] = action.get("content_type") or "application/json"
    url = f"/v1/task-runs/{task_run_id}/{action['path']}"
    response = await client.request(action["method"], url, content=content, headers=headers)
    return {
        "position": position,
        "method": action["method"],
        "path": action["path"],
        "status": response.status_code,
    }


def _snapshot_files(reference: Mapping[str, Any]) -> dict[str, bytes]:
    files = {}
    for item in reference["snapshot"]["files"]:
        if "content_base64" in item:
            files[item["path"]] = base64.b64decode(item["content_base64"])
        else:
            files[item["path"]] = str(item.get("content", "")).encode("utf-8")
    return files


def _judge_snapshot(task: Mapping[str, Any], grading: Grading, vocabulary: Any = None) -> Trial:
    """The reference snapshot judged offline: the task's criteria as they stand (with the
    benchmark's voice vocabulary, as a run of the draft would), the input entity from the
    snapshot's manifest (a downloaded state has it) or the task's own inline one."""
    files = _snapshot_files(task["reference"])
    trial = Trial("reference", snapshot={"files": len(files), "warnings": []})
    try:
        state = open_snapshot_files(files)
    except SnapshotError as exc:
        trial.failure = f"the reference snapshot cannot be read: {exc}"
        return trial
    specs = [CriterionSpec.from_json(criterion, i) for i, criterion in enumerate(task.get("criteria", []))]
    inline = task.get("input_entity")
    entity = state.input_entity() or (
        inline if isinstance(inline, dict) and "entity_id" not in inline else None
    )
    verified = verify_task(
        specs,
        state,
        input_entity=entity,
        semantic=grading.semantic,
        judge=grading.judge,
        vocabulary=vocabulary,
    )
    trial.snapshot["warnings"] = list(state.warnings)  # type: ignore[index]
    trial.score, trial.verdict = float(verified.score.score), verified.score.verdict
    trial.checks = [{"criterion_id": run.spec.criterion_id, **run.as_json()} for run in verified.runs]
    return trial


def _idle_ok(task: Mapping[str, Any]) -> dict[str, bool]:
    return {criterion["id"]: bool(criterion.get("idle_ok")) for criterion in task.get("criteria", [])}


def _check_summary(check: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("criterion_id", "label", "status", "passed", "score", "details", "evidence")
    return {key: check.get(key) for key in keys}


def _problems(task: Mapping[str, Any], idle: Trial, reference: Trial | None) -> list[dict[str, Any]]:
    problems: list[dict[str, Any]] = []
    if idle.failure:
        problems.append({"kind": "idle_start_failed", "message": idle.failure})
    allowed = _idle_ok(task)
    for check in idle.checks:
        if check.get("passed") and not allowed.get(check.get("criterion_id") or "", False):
            problems.append(
                {
                    "kind": "passes_idle",
                    "message": f"criterion {check['label']!r} passes with no agent action "
                    "(mark it idle_ok if that is intended)",
                    "criterion": _check_summary(check),
                }
            )
    if idle.score:
        problems.append(
            {
                "kind": "idle_score",
                "message": f"an agent that does nothing scores {idle.score:g} on this task "
                "(gate it with a required criterion)",
            }
        )
    if reference is None:
        return problems
    if reference.failure:
        kind = "reference_unreadable" if reference.snapshot is not None else "reference_start_failed"
        problems.append({"kind": kind, "message": reference.failure})
    for action in reference.actions:
        if action["status"] >= 400:
            message = f"reference action {action['position']} ({action['method']} {action['path']}) answered {action['status']}"
            problems.append({"kind": "reference_action_failed", "message": message, "action": action})
    for check in reference.checks:
        if not check.get("passed"):
            problems.append(
                {
                    "kind": "reference_fails",
                    "message": f"the reference solution fails criterion {check['label']!r}",
                    "criterion": _check_summary(check),
                }
            )
    return problems


def _client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://assay.self-test", timeout=120)


async def _self_test(
    client: httpx.AsyncClient, org: Mapping[str, str], task_id: str, grading: Grading
) -> SelfTest:
    task = _ok(await client.get(f"/tasks/{task_id}", headers=org))
    idle = await _trial(client, org, task, "idle")
    given = task.get("reference") or {}
    reference = None
    if given.get("snapshot"):
        benchmark = _ok(await client.get(f"/benchmarks/{task['benchmark_id']}", headers=org))
        reference = await run_in_threadpool(_judge_snapshot, task, grading, benchmark.get("vocabulary"))
    elif given.get("actions"):
        reference = await _trial(client, org, task, "reference")
    return SelfTest(task["id"], task["name"], idle, reference, _problems(task, idle, reference))


async def self_test_task(app: FastAPI, authorization: str, task_id: str) -> SelfTest:
    """Run the idle trial, and the reference trial when the task has one. The inner API calls
    authenticate the caller's own `authorization`; a refusal (401, 403, a foreign task's 404) is
    raised as `_Refused` for the route to pass on unchanged (`refusal_of`)."""
    async with _client(app) as client:
        return await _self_test(client, {"Authorization": authorization}, task_id, app.state.grading)


async def self_test_benchmark(app: FastAPI, authorization: str, benchmark_id: str) -> list[SelfTest]:
    """Self-test every task of a benchmark's draft, in task order."""
    org = {"Authorization": authorization}
    async with _client(app) as client:
        task_ids: list[str] = []
        cursor: str | None = None
        while True:
            params = {"benchmark_id": benchmark_id, "limit": "100", **({"cursor": cursor} if cursor else {})}
            page = _ok(await client.get("/tasks", params=params, headers=org))
            task_ids += [task["id"] for task in page["data"]]
            cursor = page["_meta"]["next"]
            if not cursor:
                break
        return [await _self_test(client, org, task_id, app.state.grading) for task_id in reversed(task_ids)]


def refusal_response(error: Exception) -> Response:
    """The inner API's refusal behind `error` (401, 403, a foreign id's 404), passed through to the
    caller unchanged; any other error is re-raised for the app's error boundary."""
    if not isinstance(error, _Refused):
        raise error
    return Response(error.response.content, error.response.status_code, media_type="application/json")
