"""The reference agent's loop: a plain tool-calling loop over an OpenAI-compatible chat endpoint.

One task run: read the tools (`GET …/tools?format=openai`), give the model the system prompt
(`system_prompt.md`) and the task, and while the model asks for tools run each one through
`POST …/tools/{name}` and hand back its answer (the tool's output, or the API's error envelope).
It stops when the model answers without tool calls, after `max_steps` model turns, or at
`max_seconds`; then it posts the conversation as the run's trajectory. Completing the task run
(and so grading it) is the caller's, never the model's: no tool reaches it.

A model's slip is the model's: arguments that are not JSON are answered with a `BAD_REQUEST`
envelope without calling anything, an unknown tool with the service's `NOT_FOUND`; a model
endpoint that fails or times out ends the task run's loop (`AgentResult.stopped`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = ["SYSTEM_PROMPT", "AgentLimits", "AgentResult", "ModelEndpoint", "work_task_run"]

MAX_CONTENT = 16_000
"""Characters of one message's text kept in the posted trajectory (the service caps a step at 64 KiB)."""
SYSTEM_PROMPT = (Path(__file__).parent / "system_prompt.md").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    url: str
    """The OpenAI-compatible base URL (its `/chat/completions` is called), e.g. http://127.0.0.1:8000/v1."""
    model: str
    api_key: str | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class AgentLimits:
    max_steps: int = 30
    """Model turns per task run."""
    max_seconds: float = 300.0
    """Wall-clock budget per task run, model calls included."""


@dataclass
class AgentResult:
    steps: int = 0
    tool_calls: int = 0
    stopped: str = "done"
    """`done` (the model answered), `max_steps`, `max_seconds`, or `model_error: …`."""
    messages: list[dict[str, Any]] = field(default_factory=list)


def _task_text(task: dict[str, Any]) -> str:
    item = task.get("task_item")
    instruction = item.get("instruction") if isinstance(item, dict) else item
    text = instruction if isinstance(instruction, str) else json.dumps(item, ensure_ascii=False)
    return f"Task: {task.get('name', '')}\n\n{text}"


def _model_turn(
    client: httpx.Client,
    endpoint: ModelEndpoint,
    messages: list[dict[str, Any]],
    tools: list[Any],
    timeout: float,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": endpoint.model, "messages": messages}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    if endpoint.temperature is not None:
        body["temperature"] = endpoint.temperature
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    response = client.post(
        endpoint.url.rstrip("/") + "/chat/completions", json=body, headers=headers, timeout=timeout
    )
    response.raise_for_status()
    message = response.json()["choices"][0]["message"]
    if not isinstance(message, dict):
        raise ValueError("the model's answer has no message")
    return message


def _run_tool(assay: httpx.Client, task_run_id: str, call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as bad:
        error = {"code": "BAD_REQUEST", "message": f"the arguments are not valid JSON: {bad}", "details": {}}
        return json.dumps({"error": error})
    response = assay.post(
        f"/v1/task-runs/{task_run_id}/tools/{name}",
        json=arguments,
        headers={"X-Tool-Call-Id": str(call.get("id") or "")},
    )
    return response.text


def work_task_run(
    assay: httpx.Client,
    model: httpx.Client,
    endpoint: ModelEndpoint,
    task_run_id: str,
    task: dict[str, Any],
    limits: AgentLimits,
) -> AgentResult:
    """Work one started task run; `assay` carries its run token."""
    began = time.monotonic()
    tools = assay.get(f"/v1/task-runs/{task_run_id}/tools", params={"format": "openai"}).json()["tools"]
    result = AgentResult()
    messages = result.messages
    messages += [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": _task_text(task)}]
    while True:
        left = limits.max_seconds - (time.monotonic() - began)
        if result.steps >= limits.max_steps:
            result.stopped = "max_steps"
            break
        if left <= 0:
            result.stopped = "max_seconds"
            break
        try:
            message = _model_turn(model, endpoint, messages, tools, timeout=left)
        except httpx.TimeoutException:
            result.stopped = "max_seconds"
            break
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as failed:
            result.stopped = f"model_error: {failed}"
            break
        result.steps += 1
        calls = [call for call in message.get("tool_calls") or [] if isinstance(call, dict)]
        kept: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if calls:
            kept["tool_calls"] = calls
        messages.append(kept)
        if not calls:
            break
        for call in calls:
            result.tool_calls += 1
            content = _run_tool(assay, task_run_id, call)
            messages.append({"role": "tool", "tool_call_id": str(call.get("id") or ""), "content": content})
    _post_trajectory(assay, task_run_id, messages)
    return result


def _post_trajectory(assay: httpx.Client, task_run_id: str, messages: list[dict[str, Any]]) -> None:
    """In posts of at most 100 steps, each step's text cut to fit the service's cap per step."""
    steps = [
        {**message, "content": message["content"][:MAX_CONTENT] + " …[cut]"}
        if isinstance(message.get("content"), str) and len(message["content"]) > MAX_CONTENT
        else message
        for message in messages
    ]
    for start in range(0, len(steps), 100):
        assay.post(f"/v1/task-runs/{task_run_id}/trajectory", json={"steps": steps[start : start + 100]})
