"""Agent tools: what each surface offers a model as typed functions (`Surface.tools`).

A tool is a description (name, text, JSON Schema of its input and of its output, every parameter
described) plus two pure translations: `build` turns validated arguments into one HTTP request to
the surface's own routes (a `ToolRequest`, its path under the surface's base), and `read` turns
that route's answer into the tool's output. The service executes the request against its own app
in-process with the caller's run token (`service/tools`), so a tool call is the protocol request:
the same events, limits, write gate, refusals and grading. Nothing here does I/O.

A surface declares its tools next to its routes (`sandboxes/<surface>/tools.py`) and names them
in its class (`tools = TOOLS`); a surface without tools keeps `BaseSurface.tools`, empty.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AgentTool",
    "ToolInputError",
    "ToolRequest",
    "ToolResponse",
    "array",
    "boolean",
    "integer",
    "obj",
    "string",
]


class ToolInputError(ValueError):
    """Arguments the schema lets through but the tool cannot turn into a request: `field` → why."""

    def __init__(self, problems: Mapping[str, str]):
        super().__init__("; ".join(f"{key}: {why}" for key, why in problems.items()))
        self.problems = dict(problems)


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One request to the surface's routes: `path` is under `/v1/task-runs/{id}/<surface>`."""

    method: str
    path: str = ""
    params: Sequence[tuple[str, str]] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bytes | None = None

    @staticmethod
    def json(method: str, path: str, body: Any, content_type: str = "application/json") -> ToolRequest:
        return ToolRequest(
            method, path, headers={"Content-Type": content_type}, content=json.dumps(body).encode()
        )


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The route's answer, as `read` sees it (only successful answers reach `read`)."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True, slots=True)
class AgentTool:
    name: str
    surface: str
    """The surface (URL segment) whose routes it calls; the tool exists only where it has a sandbox."""
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    build: Callable[[dict[str, Any]], ToolRequest]
    read: Callable[[ToolResponse], dict[str, Any]]
    facts: tuple[str, ...] = ()
    """Keys of its sandbox's stored credentials the agent must know to use it (the HL7 receiving
    facility MSH-6 names): `task_read` shows them under `facts.<surface>`, as `start` shows them."""
    written: Callable[[ToolResponse], bytes | None] | None = None
    """`read`'s output as JSON text, written around the route's own body instead of decoding it
    (for a tool whose output holds the answer as it is: FHIR's); None, from it or in its place,
    leaves the output to `read`. What it writes must be what encoding `read`'s output would give."""


def string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def integer(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def boolean(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "boolean", "description": description, **extra}


def array(description: str, items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "description": description, "items": items, **extra}


def obj(
    properties: dict[str, dict[str, Any]],
    required: Sequence[str] = (),
    *,
    description: str | None = None,
    closed: bool = True,
) -> dict[str, Any]:
    """An object schema; `closed` refuses keys it does not name (a typo is an error, not ignored)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    if description:
        schema["description"] = description
    return schema
