"""The MCP tools of docs/sdk.md as data: each tool's actions, their camelCase parameters, and the SDK
call each one makes. `server.py` only wires these into MCP.

A call is checked here only for what the HTTP API cannot see (the action, unknown or missing
parameters, ids that are not strings); everything else — assertion shapes, weights, references —
is validated by the API itself, so a tool error carries the same envelope a `curl` would get.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from assay.client._models import Model
from assay.core.assertions import ASSERTION_MODELS
from assay.core.assertions.schema import assertion_schema

__all__ = ["TOOLS", "InvalidCall", "Tool", "natural_language", "run_tool"]

Json = dict[str, Any]
Run = Callable[[Any, Json], Awaitable[Any]]
"""An action: the `AsyncAssay` (typed `Any`: the SDK annotates its methods with the sync types)
and the call's arguments → the JSON result."""

NATURAL_LANGUAGE = "natural-language"
"""The assertion type a legacy eval's free text is stored as (docs/assertions.md): judged by the LLM judge
when one is configured, else scored `unsupported assertion`."""


class InvalidCall(Exception):
    """A tool call the API never sees: its envelope is built here, in the API's shape (docs/api.md)."""

    def __init__(self, details: dict[str, list[str]]):
        self.details = details
        key, messages = next(iter(details.items()))
        super().__init__(f"invalid value at {key}: {messages[0]}")

    def envelope(self) -> Json:
        return {"error": {"code": "VALIDATION_ERROR", "message": str(self), "details": self.details}}


@dataclass(frozen=True)
class Action:
    run: Run
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    actions: dict[str, Action]
    properties: dict[str, Json] = field(default_factory=dict)
    definitions: dict[str, Json] = field(default_factory=dict)
    """JSON Schema `$defs` the properties refer to (`#/$defs/<name>`)."""

    def input_schema(self) -> Json:
        schema: Json = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(self.actions), "description": "What to do."},
                **self.properties,
            },
            "required": ["action"],
        }
        if self.definitions:
            schema["$defs"] = self.definitions
        return schema


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _given(args: Json, *names: str) -> Json:
    """The camelCase parameters present in `args`, as the API's snake_case keys."""
    return {_snake(name): args[name] for name in names if name in args}


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, Model) else value


async def _all(pages: Any) -> Json:
    return {"data": [_dump(item) async for item in pages]}


async def _deleted(done: Awaitable[None]) -> Json:
    await done
    return {"deleted": True}


def natural_language(text: str) -> Json:
    return {"assert": NATURAL_LANGUAGE, "text": text}


def _assertion_of(text: Any) -> Json:
    """A legacy eval's `assert`: a JSON-encoded assertion object becomes the typed assertion; any
    other text is kept as a natural-language eval (docs/assertions.md)."""
    if not isinstance(text, str):
        raise InvalidCall({"assert": ["must be a string: a JSON-encoded assertion, or plain text"]})
    try:
        parsed = json.loads(text)
    except ValueError:
        return natural_language(text)
    return parsed if isinstance(parsed, dict) else natural_language(text)


def _as_eval(criterion: Any) -> Json:
    """A criterion shown the legacy way: its `assert` as the string the eval was written with."""
    body: Json = _dump(criterion)
    assertion = body.get("assertion") or {}
    if assertion.get("assert") == NATURAL_LANGUAGE and set(assertion) == {"assert", "text"}:
        body["assert"] = assertion["text"]
    else:
        body["assert"] = json.dumps(assertion)
    return body


# -- criteria and evals -------------------------------------------------------------------------

_CRITERION_FIELDS = ("label", "weight", "axis", "inputEntityId", "required", "idleOk")


async def _create_criterion(client: Any, args: Json) -> Any:
    body = _given(args, "taskId", "assertion", *_CRITERION_FIELDS)
    return _dump(await client.criteria.create(**body))


async def _update_criterion(client: Any, args: Json) -> Any:
    return _dump(await client.criteria.update(args["id"], **_given(args, "assertion", *_CRITERION_FIELDS)))


async def _create_eval(client: Any, args: Json) -> Any:
    body = _given(args, "taskId", *_CRITERION_FIELDS)
    return _as_eval(await client.criteria.create(**body, assertion=_assertion_of(args["assert"])))


async def _update_eval(client: Any, args: Json) -> Any:
    changes = _given(args, *_CRITERION_FIELDS)
    if "assert" in args:
        changes["assertion"] = _assertion_of(args["assert"])
    return _as_eval(await client.criteria.update(args["id"], **changes))


async def _in_task_order(client: Any, task_id: str) -> list[Any]:
    """A task's criteria as the task lists them (the API's order for one task's criteria)."""
    return [c async for c in client.criteria.list(task_id=task_id)]


async def _list_criteria(client: Any, args: Json) -> Json:
    return {"data": [_dump(c) for c in await _in_task_order(client, args["taskId"])]}


async def _list_evals(client: Any, args: Json) -> Json:
    return {"data": [_as_eval(c) for c in await _in_task_order(client, args["taskId"])]}


_ID = {"id": {"type": "string", "description": "The object's id."}}
_CRITERION_PROPERTIES: Json = {
    **_ID,
    "taskId": {"type": "string", "description": "Task the criterion belongs to."},
    "label": {"type": "string", "description": "Short human-readable label."},
    "weight": {"type": "number", "description": "Relative weight (default 1)."},
    "axis": {"type": "string", "description": "Optional scoring axis."},
    "inputEntityId": {"type": "string", "description": "Optional DatasetEntity the criterion is scoped to."},
    "required": {"type": "boolean", "description": "A gate: the task scores 0 unless it passes."},
    "idleOk": {"type": "boolean", "description": "An idle agent is meant to pass it (a safety rule)."},
}

_ASSERTION, _ASSERTION_DEFINITIONS = assertion_schema("#/$defs/{model}")
"""The same union, shapes and examples `/openapi.json` shows for `assertion`."""

CRITERIA = Tool(
    "criteria",
    "Manage criteria, the typed assertions the verification engine runs against a task run. "
    f"`assertion` is an object discriminated by `assert`: {', '.join(ASSERTION_MODELS)} "
    "(docs/assertions.md). Parameters are camelCase; answers are the API's objects, snake_case.",
    {
        "list": Action(_list_criteria, ("taskId",)),
        "create": Action(_create_criterion, ("taskId", "label", "assertion"), _CRITERION_FIELDS[1:]),
        "get": Action(lambda c, a: _json(c.criteria.get(a["id"])), ("id",)),
        "update": Action(_update_criterion, ("id",), ("label", "assertion", *_CRITERION_FIELDS[1:])),
        "delete": Action(lambda c, a: _deleted(c.criteria.delete(a["id"])), ("id",)),
    },
    {
        **_CRITERION_PROPERTIES,
        "assertion": _ASSERTION,
    },
    _ASSERTION_DEFINITIONS,
)

EVALS = Tool(
    "evals",
    "Legacy: criteria with `assert` as a string. A JSON-encoded assertion spec becomes a typed "
    "criterion; any other text is kept as a natural-language eval.",
    {
        "list": Action(_list_evals, ("taskId",)),
        "create": Action(_create_eval, ("taskId", "label", "assert"), _CRITERION_FIELDS[1:]),
        "get": Action(lambda c, a: _as_json(c.criteria.get(a["id"]), _as_eval), ("id",)),
        "update": Action(_update_eval, ("id",), ("label", "assert", *_CRITERION_FIELDS[1:])),
        "delete": Action(lambda c, a: _deleted(c.criteria.delete(a["id"])), ("id",)),
    },
    {
        **_CRITERION_PROPERTIES,
        "assert": {
            "type": "string",
            "description": "A JSON-encoded assertion spec, or natural-language text.",
        },
    },
)


async def _json(done: Awaitable[Any]) -> Any:
    return _dump(await done)


async def _as_json(done: Awaitable[Any], shape: Callable[[Any], Json]) -> Json:
    return shape(await done)


# -- benchmarks and tasks -----------------------------------------------------------------------

_BENCHMARK_FIELDS = ("name", "description", "environmentId", "timeout", "concurrency")

BENCHMARKS = Tool(
    "benchmarks",
    "Benchmarks: drafts you add tasks to, published as immutable `slug@version`.",
    {
        "list": Action(lambda c, a: _all(c.benchmarks.list())),
        "get": Action(lambda c, a: _json(c.benchmarks.get(a["id"])), ("id",)),
        "create": Action(
            lambda c, a: _json(c.benchmarks.create(**_given(a, *_BENCHMARK_FIELDS))),
            ("name",),
            _BENCHMARK_FIELDS[1:],
        ),
        "update": Action(
            lambda c, a: _json(c.benchmarks.update(a["id"], **_given(a, *_BENCHMARK_FIELDS))),
            ("id",),
            _BENCHMARK_FIELDS,
        ),
        "delete": Action(lambda c, a: _deleted(c.benchmarks.delete(a["id"])), ("id",)),
        "publish": Action(
            lambda c, a: _json(c.benchmarks.publish(a["id"], **_given(a, "slug"))), ("id",), ("slug",)
        ),
    },
    {
        **_ID,
        "name": {"type": "string"},
        "description": {"type": "string"},
        "environmentId": {"type": "string"},
        "timeout": {"type": "integer", "description": "Default task-run deadline, seconds."},
        "concurrency": {"type": "integer", "description": "Task runs that may be started at once."},
        "slug": {"type": "string", "description": "publish: the slug (default: from the name)."},
    },
)

_TASK_FIELDS = ("name", "taskItem", "scenario", "tags", "timeout", "datasetIds", "inputEntity")

TASKS = Tool(
    "tasks",
    "Tasks of a benchmark: the instruction payload (`taskItem`), scenario steps, datasets.",
    {
        "list": Action(lambda c, a: _all(c.tasks.list(**_given(a, "benchmarkId"))), (), ("benchmarkId",)),
        "get": Action(lambda c, a: _json(c.tasks.get(a["id"])), ("id",)),
        "create": Action(
            lambda c, a: _json(c.tasks.create(**_given(a, "benchmarkId", *_TASK_FIELDS))),
            ("benchmarkId", "name"),
            _TASK_FIELDS[1:],
        ),
        "update": Action(
            lambda c, a: _json(c.tasks.update(a["id"], **_given(a, *_TASK_FIELDS))), ("id",), _TASK_FIELDS
        ),
        "delete": Action(lambda c, a: _deleted(c.tasks.delete(a["id"])), ("id",)),
    },
    {
        **_ID,
        "benchmarkId": {"type": "string"},
        "name": {"type": "string"},
        "taskItem": {"description": "What the agent is told (any JSON)."},
        "scenario": {"type": "array", "items": {"type": "object"}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "timeout": {"type": "integer"},
        "datasetIds": {"type": "array", "items": {"type": "string"}},
        "inputEntity": {"type": "object"},
    },
)

# -- runs ---------------------------------------------------------------------------------------

BENCHMARK_RUNS = Tool(
    "benchmark-runs",
    "Benchmark runs: create one (returns its run token once), read it with its task runs, cancel it.",
    {
        "list": Action(
            lambda c, a: _all(c.benchmark_runs.list(**_given(a, "benchmarkId", "selfTests"))),
            (),
            ("benchmarkId", "selfTests"),
        ),
        "get": Action(lambda c, a: _json(c.benchmark_runs.get(a["id"])), ("id",)),
        "create": Action(
            lambda c, a: _json(
                c.benchmark_runs.create(**_given(a, "benchmark", "benchmarkId", "scored", "agent"))
            ),
            (),
            ("benchmark", "benchmarkId", "scored", "agent"),
        ),
        "cancel": Action(lambda c, a: _json(c.benchmark_runs.cancel(a["id"])), ("id",)),
    },
    {
        **_ID,
        "benchmark": {"type": "string", "description": "`slug@version`, or `slug` for the latest."},
        "benchmarkId": {"type": "string", "description": "Run the current draft of this benchmark."},
        "scored": {"type": "boolean"},
        "agent": {"description": "Who is running (any JSON)."},
        "selfTests": {
            "type": "boolean",
            "description": "list: also self-test runs (agent `assay self-test`), which are left out otherwise.",
        },
    },
)

TASK_RUNS = Tool(
    "task-runs",
    "Task runs: read verdict, score, axes and criterion runs; start and complete with the run token; rescore.",
    {
        "list": Action(
            lambda c, a: _all(c.task_runs.list(**_given(a, "benchmarkRunId"))), (), ("benchmarkRunId",)
        ),
        "get": Action(lambda c, a: _json(c.task_runs.get(a["id"])), ("id",)),
        "start": Action(
            lambda c, a: _json(c.task_runs.start(a["id"], run_token=a["runToken"])), ("id", "runToken")
        ),
        "complete": Action(
            lambda c, a: _json(c.task_runs.complete(a["id"], run_token=a["runToken"])), ("id", "runToken")
        ),
        "rescore": Action(lambda c, a: _json(c.task_runs.rescore(a["id"])), ("id",)),
        "cancel": Action(lambda c, a: _json(c.task_runs.cancel(a["id"])), ("id",)),
    },
    {
        **_ID,
        "benchmarkRunId": {"type": "string"},
        "runToken": {"type": "string", "description": "The benchmark run's bearer token (start, complete)."},
    },
)

CRITERION_RUNS = Tool(
    "criterion-runs",
    "Criterion runs: each criterion's result on a task run, with details and evidence.",
    {
        "list": Action(
            lambda c, a: _all(c.criterion_runs.list(**_given(a, "taskRunId"))), (), ("taskRunId",)
        ),
        "get": Action(lambda c, a: _json(c.criterion_runs.get(a["id"])), ("id",)),
    },
    {**_ID, "taskRunId": {"type": "string"}},
)

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (CRITERIA, EVALS, BENCHMARKS, TASKS, BENCHMARK_RUNS, TASK_RUNS, CRITERION_RUNS)
}

_STRING_PARAMETERS = frozenset({"id", "taskId", "benchmarkId", "benchmarkRunId", "taskRunId", "runToken"})


def _check(tool: Tool, args: Json) -> Action:
    action_name = args.get("action")
    if action_name not in tool.actions:
        known = ", ".join(tool.actions)
        reason = (
            "field required"
            if action_name is None
            else f"unknown action {action_name!r}; expected one of {known}"
        )
        raise InvalidCall({"action": [reason]})
    action = tool.actions[action_name]
    allowed = {"action", *action.required, *action.optional}
    problems: dict[str, list[str]] = {}
    for name in args:
        if name not in allowed:
            problems[name] = [f"unknown parameter for {tool.name} {action_name}"]
    for name in action.required:
        if args.get(name) is None:
            problems[name] = ["field required"]
    for name in _STRING_PARAMETERS & set(args):
        if args[name] is not None and not isinstance(args[name], str):
            problems[name] = ["must be a string"]
    if problems:
        raise InvalidCall(problems)
    return action


async def run_tool(client: Any, name: str, args: Json) -> Any:
    """Run one tool call; raises `InvalidCall` or the SDK's `AssayError` for the server to report."""
    tool = TOOLS.get(name)
    if tool is None:
        raise InvalidCall({"name": [f"unknown tool {name!r}; expected one of {', '.join(TOOLS)}"]})
    action = _check(tool, args)
    return await action.run(client, args)
