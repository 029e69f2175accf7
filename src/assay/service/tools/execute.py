"""Executing a tool: one in-process request to the app's own route, carrying the run token.

**Why a request and not a function call.** A tool call must be the protocol request — the same
events, body and rate limits, write gate (a task run that ended answers 409), refusals and
grading. The surface routes are where all of that lives (dependencies, the fast path, the error
handlers, each route's own event), and they differ per surface; calling the routes' inner
functions would have to repeat each of them and drift. So a tool builds the request a client
would send (`AgentTool.build`) and the executor sends it to the app through
an ASGI call (`asgi_request`): no socket, no second parse of the token's scope rules, and whatever a
surface changes in its routes the tool gets for free. A read the surfaces' fast path answers
(`AssayApp.answer_early`) is asked of it directly, its answer taken without the ASGI messages;
the rest is one ASGI dispatch to the routes. Arguments are checked by a quick check compiled
from the input schema before jsonschema, which words any refusal (`_accepts`). A tool whose output
holds the route's answer as it is (FHIR's) writes that output's text around the route's body
(`AgentTool.written`): the tool route sends it and the trajectory stores it without decoding and
encoding the resource again, which cost more than the rest of the tool's own work. Target: a tool
call costs at most 1.25 times its protocol request (`bench/bench_tools.py`).

**Errors.** Every refusal is the API's envelope `{"error": {code, message, details}}` with the
status the route answered: the route's own envelope as it is, and a FHIR `OperationOutcome`
(the FHIR routes' error format) wrapped in one, the outcome kept in `details`. Arguments the
tool's input schema refuses are a 422 `VALIDATION_ERROR` keyed by the argument's path; a tool the
task run does not offer is a 404 naming the ones it does.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import anyio
from fastapi import FastAPI
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.tools import AgentTool, ToolInputError, ToolResponse
from assay.service.auth.cache import TokenCache
from assay.service.tools.arguments import checks_for
from assay.service.tools.catalog import TASK_READ, tools_for
from assay.service.tools.trajectory import TrajectoryLog, tool_step
from assay.store import Caller, Forbidden, NotFound, utcnow
from assay.store.errors import Busy, DomainError
from assay.store.models import Sandbox, TaskRun

__all__ = ["ToolOutcome", "Tools", "tools_of_app"]

_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND", 405: "BAD_REQUEST",
          409: "CONFLICT", 413: "BAD_REQUEST", 422: "VALIDATION_ERROR", 429: "RATE_LIMITED", 503: "UNAVAILABLE"}  # fmt: skip
MAX_CACHED_RUNS = 10_000


def error_envelope(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


class ToolOutcome:
    """A tool call's answer: its output (`result`, and `body`, that output's JSON text) or the API
    envelope of its refusal (`error`). A tool that writes its output's text from the route's own
    bytes (`AgentTool.written`) gives `body` alone, and `result` is decoded only when asked for: a
    tool call over HTTP sends `body` as it is, and the trajectory splices it into its step."""

    __slots__ = ("_body", "_result", "error", "status", "written")

    def __init__(
        self,
        status: int,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        *,
        body: bytes | None = None,
    ):
        self.status = status
        """The route's HTTP status (200 for a tool whose route answered 2xx)."""
        self._result = result
        self.error = error
        """The API envelope, when the call was refused."""
        self._body = body
        self.written = body if result is None and error is None else None
        """The output's JSON text when the tool wrote it from the route's bytes, else None."""

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def result(self) -> dict[str, Any] | None:
        if self._result is None and self.written is not None:
            self._result = json.loads(self.written)
        return self._result

    @property
    def body(self) -> bytes:
        """The output's (or the refusal's) JSON text, as the tool route answers it."""
        if self._body is None:
            self._body = _ENCODER.encode(self.error if self.error is not None else self._result).encode()
        return self._body


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
"""`JSONResponse`'s encoding, built once (`json.dumps` with options builds an encoder per call)."""


class _RawHeaders(Mapping[str, str]):
    """An early answer's raw headers, as `ToolResponse.headers`: decoded only where a tool reads
    one (most read none, and decoding all of them cost more than the tool's own `read`)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]):
        self._raw = raw

    def __getitem__(self, name: str) -> str:
        wanted = name.lower().encode("latin-1")
        for key, value in self._raw:
            if key.lower() == wanted:
                return value.decode("latin-1")
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key.decode("latin-1").lower() for key, _ in self._raw))

    def __len__(self) -> int:
        return sum(1 for _ in self)


async def asgi_request(
    app: Any,
    method: str,
    path: str,
    *,
    params: Sequence[tuple[str, str]] = (),
    headers: Mapping[str, str],
    content: bytes = b"",
) -> ToolResponse:
    """One request to `app` as an ASGI call (what `httpx.ASGITransport` does, without building
    and parsing httpx's request and response models: a measurable share of a tool call). An app
    that answers some requests before routing (`AssayApp.answer_early`) is asked that first, and
    its answer taken as it is, without the ASGI messages; the rest go to its routes."""
    raw_headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]
    if content:
        raw_headers.append((b"content-length", str(len(content)).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode() if _PLAIN_PATH.fullmatch(path) else quote(path).encode(),
        "query_string": urlencode(list(params)).encode() if params else b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    answer_early = getattr(app, "answer_early", None)
    if answer_early is not None and method == "GET":  # (what it answers)
        scope["app"] = app
        early = await answer_early(scope)
        if early is not None:
            return ToolResponse(early.status_code, _RawHeaders(early.raw_headers), bytes(early.body))
        app = app.routed
    sent = False
    status, answer_headers, body = 500, {}, bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": content, "more_body": False}
        await anyio.sleep_forever()  # nothing more to read: wait to be cancelled, as a server would
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, answer_headers
        if message["type"] == "http.response.start":
            status = message["status"]
            answer_headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])
            }
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return ToolResponse(status, answer_headers, bytes(body))


_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.~/-]*")
"""A path `quote` leaves as it is."""


def _as_envelope(response: ToolResponse) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body
    code = _CODES.get(response.status, "INTERNAL_ERROR" if response.status >= 500 else "BAD_REQUEST")
    if isinstance(body, dict) and body.get("resourceType") == "OperationOutcome":
        issues = body.get("issue") or [{}]
        message = "; ".join(
            str(i.get("diagnostics") or i.get("code") or "") for i in issues if isinstance(i, dict)
        )
        return error_envelope(
            code, message or f"the FHIR server answered {response.status}", {"operation_outcome": body}
        )
    return error_envelope(code, response.text[:2000] or f"the route answered {response.status}")


def _validation(tool: AgentTool, arguments: Any) -> dict[str, Any] | None:
    validator, accepts = checks_for(tool.input_schema)
    if accepts is not None and accepts(arguments):
        return None
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return None
    details: dict[str, list[str]] = {}
    for error in errors:
        key = ".".join(str(p) for p in error.path) or "arguments"
        details.setdefault(key, []).append(error.message)
    return error_envelope(
        "VALIDATION_ERROR", f"the arguments of {tool.name} do not match its input schema", details
    )


class Tools:
    """One app's tool executor: the ASGI client, the runs' surfaces and the trajectory queue."""

    def __init__(self, app: FastAPI):
        self.app = app
        self._surfaces: dict[str, dict[str, dict[str, Any]]] = {}
        """Task run → its sandboxes' types → the facts its tools name (`AgentTool.facts`)."""
        self._trajectory: TrajectoryLog | None = None
        self._offered: dict[tuple[str, ...], dict[str, AgentTool]] = {}
        """The tools offered by each combination of surfaces (a handful: one per benchmark's kind)."""

    def open_trajectory(self, database: Any) -> None:
        """A new queue for an app (re)started on `database`: one closed at a shutdown takes nothing."""
        self._trajectory = TrajectoryLog(database)

    @property
    def trajectory(self) -> TrajectoryLog:
        if self._trajectory is None:
            self._trajectory = TrajectoryLog(self.app.state.database)
        return self._trajectory

    async def caller(self, authorization: str | None) -> Caller:
        """The run token's caller (401 when missing or unknown, 403 for another kind of key)."""
        tokens: TokenCache = self.app.state.tokens
        caller = tokens.cached(authorization)
        if caller is None:
            caller = await run_in_threadpool(tokens.resolve, authorization)
        if caller.kind != "run":
            raise Forbidden("the tools of a task run take its run token")
        return caller

    async def offered(self, caller: Caller, task_run_id: str) -> dict[str, AgentTool]:
        """The tools the caller's task run offers (404 for a task run outside its run)."""
        return tools_for(await self.surfaces(caller, task_run_id))

    async def surfaces(self, caller: Caller, task_run_id: str) -> dict[str, dict[str, Any]]:
        surfaces = self._surfaces.get(task_run_id)
        if surfaces is None:
            surfaces = await run_in_threadpool(self._read_surfaces, caller, task_run_id)
        return surfaces

    def _read_surfaces(self, caller: Caller, task_run_id: str) -> dict[str, dict[str, Any]]:
        with self.app.state.database.reading() as session:
            row = session.execute(
                select(TaskRun.playground_id).where(
                    TaskRun.id == task_run_id,
                    TaskRun.org_id == caller.org_id,
                    TaskRun.benchmark_run_id == caller.benchmark_run_id,
                )
            ).first()
            if row is None:
                raise NotFound(f"no task run {task_run_id} in this run")
            if row.playground_id is None:
                return {}
            sandboxes = session.execute(
                select(Sandbox.type, Sandbox.credentials).where(Sandbox.playground_id == row.playground_id)
            ).all()
        types: dict[str, dict[str, Any]] = {}
        for kind, credentials in sandboxes:
            named = {key for tool in tools_for([kind]).values() for key in tool.facts}
            types[kind] = {key: (credentials or {}).get(key) for key in sorted(named)}
        if len(self._surfaces) >= MAX_CACHED_RUNS:
            self._surfaces.clear()
        self._surfaces[task_run_id] = types  # a playground's sandboxes never change once provisioned
        return types

    async def call(
        self,
        authorization: str | None,
        task_run_id: str,
        name: str,
        arguments: Any,
        *,
        call_id: str | None = None,
        record: bool = True,
    ) -> ToolOutcome:
        """Run one tool for the token's task run; refusals come back as outcomes, not raised."""
        try:
            caller = await self.caller(authorization)
            surfaces = await self.surfaces(caller, task_run_id)
            offered = self._offered.get(tuple(surfaces))
            if offered is None:
                offered = self._offered[tuple(surfaces)] = tools_for(surfaces)
        except DomainError as refused:
            status, code = _domain_status(refused)
            return ToolOutcome(
                status, error=error_envelope(code, refused.message, getattr(refused, "details", None))
            )
        began, clock = utcnow(), time.perf_counter()
        outcome = await self._run(authorization or "", task_run_id, offered, name, arguments)
        spent = (time.perf_counter() - clock) * 1000
        if name == TASK_READ.name and outcome.result is not None:
            facts = {kind: known for kind, known in surfaces.items() if known}
            outcome = ToolOutcome(outcome.status, result={**outcome.result, "facts": facts})
        if record:
            self.trajectory.add(
                caller.org_id,
                task_run_id,
                tool_step(
                    name,
                    arguments,
                    outcome.status,
                    outcome.written or outcome.result,
                    outcome.error,
                    call_id,
                    spent,
                ),
                began,
            )
        return outcome

    async def _run(
        self, authorization: str, task_run_id: str, offered: dict[str, AgentTool], name: str, arguments: Any
    ) -> ToolOutcome:
        tool = offered.get(name)
        if tool is None:
            message = f"this task run offers no tool {name!r}"
            return ToolOutcome(404, error=error_envelope("NOT_FOUND", message, {"tools": sorted(offered)}))
        if arguments is None:
            arguments = {}
        invalid = _validation(tool, arguments)
        if invalid is not None:
            return ToolOutcome(422, error=invalid)
        try:
            request = tool.build(arguments)
        except ToolInputError as bad:
            return ToolOutcome(422, error=_input_error(tool, bad))
        if any(segment in {".", ".."} for segment in request.path.split("/")):
            # A client would have these resolved before sending (httpx does): out of the surface.
            message = f"{tool.name}: a path may not contain '.' or '..' segments"
            return ToolOutcome(400, error=error_envelope("BAD_REQUEST", message, {"path": request.path}))
        base = f"/v1/task-runs/{task_run_id}" + (f"/{tool.surface}" if tool.surface else "")
        response = await asgi_request(
            self.app,
            request.method,
            base + request.path,
            params=request.params,
            headers={**request.headers, "Authorization": authorization},
            content=request.content or b"",
        )
        if response.status >= 400:
            return ToolOutcome(response.status, error=_as_envelope(response))
        try:
            if tool.written is not None:
                written = tool.written(response)
                if written is not None:
                    return ToolOutcome(response.status, body=written)
            result = tool.read(response)
        except ToolInputError as bad:
            return ToolOutcome(422, error=_input_error(tool, bad))
        except (ValueError, KeyError, TypeError) as unreadable:
            message = f"the answer of {tool.name} could not be read: {unreadable}"
            return ToolOutcome(502, error=error_envelope("INTERNAL_ERROR", message))
        return ToolOutcome(response.status, result=result)


def _input_error(tool: AgentTool, bad: ToolInputError) -> dict[str, Any]:
    details = {key: [why] for key, why in bad.problems.items()}
    return error_envelope("VALIDATION_ERROR", f"{tool.name}: {bad}", details)


def _domain_status(error: DomainError) -> tuple[int, str]:
    from assay.service.errors import _DOMAIN  # the one status table

    if isinstance(error, Busy):
        return 503, "UNAVAILABLE"
    for kind, status, code in _DOMAIN:
        if isinstance(error, kind):
            return status, code
    return 500, "INTERNAL_ERROR"


def tools_of_app(app: FastAPI) -> Tools:
    found: Tools | None = getattr(app.state, "agent_tools", None)
    if found is None:
        found = app.state.agent_tools = Tools(app)
    return found


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
