"""`assay/benchmark`: one Inspect `Sample` per task of a published Assay benchmark.

- **Task.** `benchmark(benchmark="slug@version", url=…, api_key=…, trials=k)` creates one Assay
  benchmark run with `k` trials (the org or Solver key from `api_key` or `ASSAY_API_KEY`) and
  turns each task into a `Sample`: `input` is the task as the agent sees it (its name and
  instruction, never its criteria), `id` the task id, `metadata` its task runs by trial.
  `epochs` is `k`: Inspect's epoch `e` works the task's trial `e`.
- **Solver** (`assay_agent`). Starts the sample's task run, hands the model the task run's tools
  as `ToolDef`s built from Assay's own schemas (`GET …/tools?format=mcp`), each executing as
  `POST …/tools/{name}` with the run token (an error answers the API envelope as the tool's text),
  lets the model loop, then posts the conversation as the task run's trajectory (OpenAI chat
  messages). The model never holds a key that can complete or grade.
- **Scorer** (`assay_scorer`). Completes the task run and returns `Score(value=task score,
  answer=verdict, explanation=the failing criteria with expected vs actual, metadata={task_run_id,
  criterion_runs, axes, viewer})`.
- **Epochs.** Reduced by `mean`, `pass_at_{k}` and `pass_k_{k}` (`pass_k`: every one of the `k`
  trials passed, Assay's pass^k); a task passes when its score is 1.

Nothing here needs the network beyond the Assay URL: Inspect's `mockllm/model` runs it offline.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
from inspect_ai.scorer import (
    Score,
    Scorer,
    ScoreReducer,
    Target,
    mean,
    mean_score,
    pass_at,
    score_reducer,
    scorer,
)
from inspect_ai.scorer._reducer.registry import REDUCER_NAME
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolDef, ToolParam, ToolParams

from assay.clients.agent.loop import SYSTEM_PROMPT
from assay.clients.cli.evidence import failing_fields

__all__ = ["benchmark", "pass_k", "tool_params"]

_DEFAULT_URL = "http://127.0.0.1:8400"
_RUN_TOKENS: dict[str, str] = {}
"""Benchmark run → its run token, kept in this process: not in the samples' metadata, which
Inspect writes to its log."""


def _param(schema: dict[str, Any]) -> ToolParam:
    """One JSON Schema as Inspect's `ToolParam` (a type list becomes `anyOf`)."""
    kind = schema.get("type")
    any_of = [_param(option) for option in schema.get("anyOf") or []] or None
    if isinstance(kind, list):
        any_of, kind = [ToolParam(type=one) for one in kind], None
    extra = schema.get("additionalProperties")
    return ToolParam(
        type=kind,
        description=schema.get("description"),
        enum=schema.get("enum"),
        items=_param(schema["items"]) if isinstance(schema.get("items"), dict) else None,
        properties={k: _param(v) for k, v in schema["properties"].items()}
        if "properties" in schema
        else None,
        additionalProperties=_param(extra) if isinstance(extra, dict) else extra,
        anyOf=any_of,
        required=schema.get("required"),
    )


def tool_params(input_schema: dict[str, Any]) -> ToolParams:
    return ToolParams(
        properties={name: _param(schema) for name, schema in (input_schema.get("properties") or {}).items()},
        required=list(input_schema.get("required") or []),
    )


def _tool_defs(http: httpx.AsyncClient, task_run_id: str, described: list[dict[str, Any]]) -> list[ToolDef]:
    def executor(name: str) -> Any:
        # `**kwargs: Any`, by that name: Inspect then passes the call's arguments through as given.
        async def execute(**kwargs: Any) -> str:
            given = {key: value for key, value in kwargs.items() if value is not None}
            response = await http.post(f"/v1/task-runs/{task_run_id}/tools/{name}", json=given)
            return response.text

        return execute

    return [
        ToolDef(
            executor(tool["name"]),
            name=tool["name"],
            description=tool["description"],
            parameters=tool_params(tool["inputSchema"]),
        )
        for tool in described
    ]


def _openai_message(message: Any) -> dict[str, Any]:
    text = message.text if hasattr(message, "text") else str(message.content)
    if isinstance(message, ChatMessageAssistant):
        step: dict[str, Any] = {"role": "assistant", "content": text or None}
        if message.tool_calls:
            step["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function, "arguments": json.dumps(call.arguments)},
                }
                for call in message.tool_calls
            ]
        return step
    if isinstance(message, ChatMessageTool):
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": text[:16_000]}
    role = "system" if isinstance(message, ChatMessageSystem) else "user"
    return {"role": role, "content": text}


@solver
def assay_agent(url: str) -> Solver:
    """Start the sample's task run for this epoch, give the model its tools, let it work."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        trial = (state.epoch - 1) % len(state.metadata["task_run_ids"])
        task_run_id = state.metadata["task_run_ids"][trial]
        state.metadata["task_run_id"] = task_run_id
        headers = {"Authorization": f"Bearer {_RUN_TOKENS[state.metadata['benchmark_run_id']]}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            started = await http.post(f"/v1/task-runs/{task_run_id}/start")
            started.raise_for_status()
            described = (
                await http.get(f"/v1/task-runs/{task_run_id}/tools", params={"format": "mcp"})
            ).json()
            state.tools = _tool_defs(http, task_run_id, described["tools"])  # type: ignore[assignment]
            state.messages.insert(0, ChatMessageSystem(content=SYSTEM_PROMPT))
            state = await generate(state, tool_calls="loop")
            steps = [_openai_message(message) for message in state.messages]
            for start in range(0, len(steps), 100):
                await http.post(
                    f"/v1/task-runs/{task_run_id}/trajectory", json={"steps": steps[start : start + 100]}
                )
        return state

    return solve


def _explanation(checks: list[dict[str, Any]]) -> str:
    lines = []
    for check in checks:
        if check.get("passed"):
            continue
        misses = failing_fields(check.get("evidence"))
        detail = (
            "; ".join(f"{miss.where}: expected {miss.expected}, got {miss.actual}" for miss in misses)
            or json.dumps(check.get("details") or {}, ensure_ascii=False)[:300]
        )
        lines.append(f"✗ {check.get('label')}: {detail}")
    return "\n".join(lines) or "every criterion passed"


@scorer(metrics=[mean()])
def assay_scorer(url: str) -> Scorer:
    """Complete the task run (Assay grades it) and report its score, verdict and failing criteria."""

    async def score(state: TaskState, target: Target) -> Score:
        task_run_id = state.metadata["task_run_id"]
        headers = {"Authorization": f"Bearer {_RUN_TOKENS[state.metadata['benchmark_run_id']]}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as http:
            done = (await http.post(f"/v1/task-runs/{task_run_id}/complete")).json()
        checks = done.get("checks") or []
        return Score(
            value=float(done.get("score") or 0.0),
            answer=done.get("verdict"),
            explanation=_explanation(checks),
            metadata={
                "task_run_id": task_run_id,
                "criterion_runs": checks,
                "axes": done.get("axes") or {},
                "viewer": f"{url.rstrip('/')}/ui/task-runs/{task_run_id}",
            },
        )

    return score


@score_reducer
def pass_k(k: int, value: float = 1.0) -> ScoreReducer:
    """pass^k: 1 when each of the `k` epochs scored `value` (every trial passed), else 0."""

    def reduce(scores: list[Score]) -> Score:
        passed = all(float(s.as_float()) >= value for s in scores[:k]) and len(scores) >= k
        return Score(value=1.0 if passed else 0.0)

    setattr(pass_k, REDUCER_NAME, f"pass_k_{k}")  # how Inspect names a reducer made with its k
    return reduce


def _created_run(url: str, api_key: str, benchmark: str, trials: int) -> dict[str, Any]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=120) as org:
        agent = {"name": "inspect", "harness": "inspect_ai"}
        created = org.post(
            "/v1/benchmark-runs", json={"benchmark": benchmark, "trials": trials, "agent": agent}
        )
        if created.status_code != 201:
            raise ValueError(f"Assay refused the benchmark run ({created.status_code}): {created.text[:500]}")
        run: dict[str, Any] = created.json()
        return run


@task
def benchmark(
    benchmark: str,
    url: str | None = None,
    api_key: str | None = None,
    trials: int = 1,
    message_limit: int = 60,
) -> Task:
    """A published Assay benchmark (`slug@version`) as an Inspect task; `trials` epochs."""
    url = url or os.environ.get("ASSAY_BASE_URL") or _DEFAULT_URL
    key = api_key or os.environ.get("ASSAY_API_KEY")
    if not key:
        raise ValueError("an Assay org or Solver key is needed: -T api_key=… or ASSAY_API_KEY")
    run = _created_run(url, key, benchmark, trials)
    _RUN_TOKENS[run["benchmark_run_id"]] = run["bearer_token"]
    by_task: dict[str, list[dict[str, Any]]] = {}
    for task_run in run["task_runs"]:
        by_task.setdefault(task_run["task_id"], []).append(task_run)
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {run['bearer_token']}"}, timeout=60
    ) as http:
        samples = []
        for task_id, task_runs in by_task.items():
            view = http.get(f"/v1/task-runs/{task_runs[0]['id']}").json()["task"]
            item = view.get("task_item")
            instruction = item.get("instruction") if isinstance(item, dict) else item
            text = instruction if isinstance(instruction, str) else json.dumps(item, ensure_ascii=False)
            samples.append(
                Sample(
                    id=task_id,
                    input=[ChatMessageUser(content=f"Task: {view.get('name')}\n\n{text}")],
                    metadata={
                        "name": view.get("name"),
                        "task_run_ids": [task_run["id"] for task_run in task_runs],
                        "benchmark_run_id": run["benchmark_run_id"],
                    },
                )
            )
    return Task(
        dataset=MemoryDataset(samples, name=benchmark),
        solver=assay_agent(url),
        scorer=assay_scorer(url),
        epochs=Epochs(trials, [mean_score(), pass_at(trials), pass_k(trials)]),
        message_limit=message_limit,
        metadata={
            "assay_benchmark_run": run["benchmark_run_id"],
            "viewer": f"{url.rstrip('/')}/ui/runs/{run['benchmark_run_id']}",
        },
    )
