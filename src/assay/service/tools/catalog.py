"""Which tools a task run offers, and their schemas in each harness's format.

A task run offers `task_read` and the tools of each surface it has a sandbox of (`Surface.tools`):
a surface the run lacks offers none. A run not started yet has no sandboxes: only `task_read`.
Formats: `openai` (Chat Completions `tools`: `{type: function, function: {name, description,
parameters, strict: false}}`), `anthropic` (Messages `tools`: `{name, description, input_schema}`)
and `mcp` (`{name, description, inputSchema, outputSchema}`, as MCP's `tools/list`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from assay.sandboxes import SURFACES
from assay.sandboxes.tools import AgentTool, ToolRequest, ToolResponse, obj

__all__ = ["FORMATS", "TASK_READ", "formatted", "tools_for"]

TASK_READ = AgentTool(
    name="task_read",
    surface="",
    description="Read your task: its name and instructions, and the task run's phase, status and deadline.",
    input_schema=obj({}),
    output_schema=obj(
        {
            "task_run_id": {"type": "string", "description": "This task run's id"},
            "name": {"type": "string", "description": "The task's name"},
            "instruction": {
                "type": ["string", "null"],
                "description": "What to do (the task item's instruction)",
            },
            "task_item": {"description": "The whole task item, as the task's author wrote it"},
            "phase": {"type": "string", "description": "pending, started or completed"},
            "status": {"type": "string", "description": "The task run's status"},
            "deadline_at": {
                "type": ["string", "null"],
                "description": "When the task run times out (ISO 8601)",
            },
            "facts": {
                "type": "object",
                "description": "What some tools need you to know, by surface (hl7: receiving_facility for MSH-6)",
            },
        },
        ["task_run_id", "name", "task_item", "phase", "status"],
        closed=False,
    ),
    build=lambda args: ToolRequest("GET", ""),
    read=lambda response: _task(response),
)
"""Served from `GET /v1/task-runs/{id}` (the surface "" is the task run itself): the task as the
agent sees it, never its criteria."""


def _task(response: ToolResponse) -> dict[str, Any]:
    body = response.json() or {}
    task = body.get("task") or {}
    item = task.get("task_item")
    instruction = (
        item.get("instruction") if isinstance(item, dict) else item if isinstance(item, str) else None
    )
    return {
        "task_run_id": body.get("task_run_id"),
        "name": task.get("name") or body.get("name"),
        "instruction": instruction,
        "task_item": item,
        "phase": body.get("phase"),
        "status": body.get("status"),
        "deadline_at": body.get("deadline_at"),
    }


def tools_for(surfaces: Iterable[str]) -> dict[str, AgentTool]:
    """`task_read` and the tools of the named surfaces, in registry order."""
    have = set(surfaces)
    found = {TASK_READ.name: TASK_READ}
    for name, surface in SURFACES.items():
        if name in have:
            found.update((tool.name, tool) for tool in surface.tools)
    return found


def _openai(tool: AgentTool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema},
    }


def _anthropic(tool: AgentTool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def _mcp(tool: AgentTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
    }


FORMATS = {"openai": _openai, "anthropic": _anthropic, "mcp": _mcp}


def formatted(tools: Sequence[AgentTool], form: str) -> list[dict[str, Any]]:
    return [FORMATS[form](tool) for tool in tools]
