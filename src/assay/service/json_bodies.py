"""Big JSON request bodies are parsed and checked once, on a worker thread (for big datasets).

FastAPI parses a JSON body with `json.loads` on the event loop, and `limits.json_body_limit` then
walked it for depth and encoded it for the strict-JSON check, also on the event loop: a 4 MB
dataset held every other request for ~60 ms, and the 1,024-patient upload (469 MB) spent more
time there than anywhere else (`docs/performance.md`, "The agent path under load"). For a body of `BIG_BODY`
bytes or more, `TransactionRoute` now calls `read_big_body_first` before FastAPI looks at the request: it
reads the bytes, and on a worker thread, with the cyclic garbage collector paused, parses them
(`loads`) and runs the body checks (`body_problem`). The parsed value goes where Starlette
caches `request.json()`, so FastAPI uses it instead of parsing again, and the verdict goes in the
scope, where `json_body_limit` raises it at the point it always did: every answer, error or not,
is the one the event-loop path gives. Smaller bodies take that path unchanged (a thread hop costs
more than they do).

`loads` is `json.loads` with the same value and the same errors, faster: orjson when its value
must be the same — orjson refuses what `json.loads` accepts beyond strict JSON (NaN, Infinity,
numbers that overflow, lone surrogates, a BOM, UTF-16/32) and reads integers beyond 64 bits as
floats, so on any refusal, or where a float may have been such an integer, `json.loads` parses it
instead. What orjson accepted is strict JSON, so the strict check reduces to looking for a NUL
(`\\u0000`) in the text; and the rendering that looks for `e+` decides the depth too (`_decode`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from assay.core.memory import collection_paused
from assay.sandboxes.json_depth import MAX_JSON_DEPTH, nested_deeper_than
from assay.store.errors import BadRequest, DomainError, Invalid
from assay.store.json_values import storable_json_problem

__all__ = ["BIG_BODY", "BodyChecked", "body_checked", "body_problem", "loads", "read_big_body_first"]

BIG_BODY = 64 * 1024
"""Bodies from this size on are parsed and checked on a worker thread (below it, on the loop)."""

_NUL_ESCAPE = b"\\u0000"
"""The only way a NUL gets into parsed JSON: a raw NUL byte in a string is refused by both parsers."""

_JUMPS = 10_000
"""How many occurrences of its rare byte `_contains` visits before it searches for a needle whole."""

_CHECKED = "assay.body_checked"


@dataclass(frozen=True, slots=True)
class BodyChecked:
    """The body checks' verdict on a body `read_big_body_first` parsed: the error to raise, if any."""

    problem: DomainError | None


def loads(raw: bytes) -> tuple[Any, bool]:
    """(`json.loads(raw)`, whether the value is known to be strict JSON); raises what it raises.

    orjson reads an integer beyond 64 bits as a float (`2**64` as `1.8446744073709552e+19`), and
    writes every float from 1e16 up with an exponent (`e+`): so when its own rendering of the value
    has no `e+`, no integer was changed. (A digit run in the text cannot tell: Synthea's narratives
    hold 19-digit seeds.) With an `e+` anywhere, a string's included, `json.loads` reads it again."""
    value, strict, _ = _decode(raw)
    return value, strict


def _decode(raw: bytes) -> tuple[Any, bool, bool | None]:
    """`loads`, and whether the value nests deeper than `MAX_JSON_DEPTH` when that is known.

    The rendering that looks for `e+` also decides the depth, at no cost of its own: orjson
    refuses to write past `_ORJSON_DEPTH` levels, so the value wrapped in `_ORJSON_DEPTH -
    MAX_JSON_DEPTH` lists is written exactly when it nests no deeper than `MAX_JSON_DEPTH`
    (`nested_deeper_than`'s walk took 2.1 ms per MB of a Synthea upload, as long as the parse).
    When that rendering fails (too deep, or anything else orjson refuses) the depth is unknown
    (None) and `body_problem` walks the value as before."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw), False, None
    wrapped = value
    for _ in range(_ORJSON_DEPTH - MAX_JSON_DEPTH):
        wrapped = [wrapped]
    try:
        rendered = orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return json.loads(raw), False, None
    if _contains(rendered, b"e+", 1):
        return json.loads(raw), False, False  # the same nesting: only numbers may read apart
    return value, True, False


def _orjson_depth() -> int:
    """How many levels of lists orjson writes before it refuses (254 in orjson 3.x), found once."""
    value: list[Any] = []
    for depth in range(1, 4096):
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            return depth - 1
        value = [value]
    raise RuntimeError("orjson wrote 4,096 nested lists: `_decode` cannot use it to bound the depth")


_ORJSON_DEPTH = _orjson_depth()


def _contains(text: bytes, needle: bytes, rare: int) -> bool:
    """`needle in text`, found by jumping (memchr) between the occurrences of its byte at `rare`,
    one that is rare in JSON (`+`, a backslash). Python's substring search slows down where the
    needle's other bytes are common: `b"e+" in` a Synthea bundle cost 1.1 ms per MB, this ~0.1;
    past `_JUMPS` occurrences it is that search after all."""
    anchor = needle[rare : rare + 1]
    at = text.find(anchor, rare)
    for _ in range(_JUMPS):
        if at == -1:
            return False
        if text.startswith(needle, at - rare):
            return True
        at = text.find(anchor, at + 1)
    return needle in text


def body_problem(
    value: Any, *, strict: bool = False, raw: bytes = b"", too_deep: bool | None = None
) -> DomainError | None:
    """What `json_body_limit` refuses a parsed body for: nested past `MAX_JSON_DEPTH` (400), or a
    value no table can hold (422 naming the key: `store.json_values.storable_json_problem`).
    `strict` says `value` came from `raw` through orjson: then only a NUL escape can be wrong.
    `too_deep`, when known (`_decode`), spares the walk that decides it."""
    if too_deep if too_deep is not None else nested_deeper_than(value):
        return BadRequest(f"request body is nested more than {MAX_JSON_DEPTH} levels deep")
    if strict and not _contains(raw, _NUL_ESCAPE, 0):
        return None
    problem = storable_json_problem(value)
    if problem:
        where, reason = problem
        return Invalid({where or "body": [reason]})
    return None


def _parse_and_check(raw: bytes) -> tuple[Any, DomainError | None]:
    value, strict, too_deep = _decode(raw)
    return value, body_problem(value, strict=strict, raw=raw, too_deep=too_deep)


async def read_big_body_first(
    request: Request, handler: Callable[[Request], Awaitable[Response]]
) -> Response:
    """`handler(request)`, with a body of `BIG_BODY` bytes or more parsed and checked on a worker
    thread first: the value left where `request.json()` finds it, the verdict for `json_body_limit`.
    A body that does not parse is left alone: FastAPI parses it again and answers as it always did.

    The garbage collector is paused from the parse until the handler has answered, and the parsed
    body is dropped before it resumes: its tens of thousands of containers live that long, and
    each collection that met them rescanned them all (the parse alone took twice as long with
    collection on)."""
    raw = await _big_body(request)
    if raw is None:
        return await handler(request)
    with collection_paused():
        try:
            value, problem = await run_in_threadpool(_parse_and_check, raw)
        except Exception:  # not JSON at all: the event-loop path reports it, as before
            return await handler(request)
        request._json = value  # Starlette's cache of `request.json()`, which FastAPI reads the body from
        request.scope[_CHECKED] = BodyChecked(problem)
        del value
        try:
            return await handler(request)
        finally:  # freed now, while collection is still off, instead of collected later
            del request._json


async def _big_body(request: Request) -> bytes | None:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) < BIG_BODY):
        return None
    try:
        raw = await request.body()
    except ClientDisconnect:  # FastAPI meets it again when it reads, and answers as before
        return None
    return raw if len(raw) >= BIG_BODY else None


def body_checked(request: Request) -> BodyChecked | None:
    """The verdict `read_big_body_first` left for this request, or None (the body was not read there)."""
    checked: BodyChecked | None = request.scope.get(_CHECKED)
    return checked
