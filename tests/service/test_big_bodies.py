"""Big JSON bodies are parsed and checked on a worker thread, with the same answers (issue 9).

`service/json_bodies.py`: a body of `BIG_BODY` bytes or more is parsed by orjson (or `json.loads`
where orjson's value could differ), depth-walked and checked for what no table can hold on a
worker thread, with the garbage collector paused, before FastAPI reads it. Every answer must be
the one the event-loop path gives: each case below is sent through both paths (the threshold
moved) and the answers compared, on both backends. And a dataset's 201 echoes the bytes stored.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.core import memory
from assay.sandboxes.json_depth import nested_deeper_than
from assay.service import json_bodies
from assay.store.errors import BadRequest
from assay.store.json_values import content_hash
from tests.conftest import FIXTURES
from tests.store.test_json_values import JSON_LIKE, _same

from .builders import ok, unique
from .conftest import Server

_DEEP = '{"benchmark": "x", "agent": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}"
_AS_DEEP_AS_ALLOWED = '{"benchmark": "x", "agent": ' + '{"a": ' * 98 + "1" + "}" * 98 + "}"
_CASES: list[tuple[str, bytes]] = [
    ("/benchmarks", b'{"name": "x",'),  # malformed: 400
    ("/benchmarks", b"[1, 2]"),  # not an object: 422
    ("/benchmarks", b'{"name": 123}'),
    ("/benchmarks", b'{"name": "\\udc00"}'),  # a lone surrogate: 422 naming the key
    ("/benchmarks", b'{"name": "a\\u0000"}'),  # a NUL: 422 naming the key
    ("/benchmarks", b'{"name": "a\\\\u0000"}'),  # an escaped backslash, then text: no NUL
    ("/benchmarks", b'\xef\xbb\xbf{"name": "bom"}'),  # json.loads reads past a BOM
    ("/benchmarks", '{"name": "utf-16"}'.encode("utf-16")),  # and detects UTF-16
    ("/benchmarks", b'{"name": "\xed\xa0\x80"}'),  # not UTF-8
    ("/benchmarks", b'{"name": "a", "name": "dup"}'),
    ("/v1/benchmark-runs", _DEEP.encode()),  # 400: nested too deep
    ("/v1/benchmark-runs", _AS_DEEP_AS_ALLOWED.encode()),
    ("/v1/benchmark-runs", b'{"benchmark": "x", "agent": {"a": NaN}}'),
    ("/v1/benchmark-runs", b'{"benchmark": "x", "agent": {"\\udfff": 1e400}}'),
    ("/environments", b'{"name": "big", "settings": {"n": 123456789012345678901234567890, "m": -9223372036854775809}}'),
    ("/environments", b'{"name": "floats", "settings": {"a": 1e-7, "b": 1.5e300, "c": 1e16, "d": 0.00001}}'),
    ("/environments", b'{"name": "e+ in text", "settings": {"a": "5e+20,"}}'),
    ("/datasets", b'{"name": "nan", "type": "fhir", "data": {"resourceType": "Bundle", "type": "collection", '
     b'"entry": [{"resource": {"resourceType": "Patient", "a": NaN}}]}}'),
    ("/datasets", b'{"name": "n", "type": "voice", "data": {"turns": [{"speaker": "ivr", "text": "a\\u0000"}]}}'),
]  # fmt: skip


def _answer(response: httpx.Response) -> tuple[int, Any]:
    """Status and body, without what differs between two creations (ids, time stamps)."""
    try:
        body = response.json()
    except ValueError:
        return response.status_code, response.text
    if isinstance(body, dict):
        body = {key: value for key, value in body.items() if key not in ("id", "created_at", "updated_at")}
    return response.status_code, body


@pytest.fixture
def thread_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every body takes the worker-thread path; what each parse saw is recorded."""
    seen: list[dict[str, Any]] = []
    real = json_bodies._parse_and_check

    def watched(raw: bytes) -> Any:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append({"on_loop": on_loop, "collecting": gc.isenabled()})
        return real(raw)

    monkeypatch.setattr(json_bodies, "BIG_BODY", 1)
    monkeypatch.setattr(json_bodies, "_parse_and_check", watched)
    yield seen


@pytest.mark.parametrize(("path", "raw"), _CASES)
def test_a_big_body_gets_the_answer_a_small_one_gets(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch, path: str, raw: bytes
) -> None:
    headers = {"Content-Type": "application/json"}
    small = _answer(api.post(path, content=raw, headers=headers))
    monkeypatch.setattr(json_bodies, "BIG_BODY", 1)
    big = _answer(api.post(path, content=raw, headers=headers))
    assert big == small


def test_the_thread_path_runs_off_the_loop_without_collection_and_keeps_values(
    api: httpx.Client, thread_path: list[dict[str, Any]]
) -> None:
    settings = {
        "big": 2**70,
        "neg": -(2**64),
        "tiny": 1e-7,
        "huge": 1.5e300,
        "text": "é\u2028😀",
        "nul": "\\u0000",
    }
    body = json.dumps({"name": unique("env"), "settings": settings})
    created = ok(api.post("/environments", content=body, headers={"Content-Type": "application/json"}), 201)
    assert _same(created["settings"], settings)
    assert _same(ok(api.get(f"/environments/{created['id']}"))["settings"], settings)
    assert thread_path == [{"on_loop": False, "collecting": False}]
    assert gc.isenabled()


def test_a_text_content_type_is_refused_as_before(api: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """FastAPI reads JSON only from a JSON content type; the thread path parses any big body but
    leaves the answer to FastAPI: a 422 for the wrong type, the same check errors as before."""
    for raw in (b'{"name": "t"}', _DEEP.encode()):
        headers = {"Content-Type": "text/plain"}
        small = _answer(api.post("/benchmarks", content=raw, headers=headers))
        monkeypatch.setattr(json_bodies, "BIG_BODY", 1)
        big = _answer(api.post("/benchmarks", content=raw, headers=headers))
        monkeypatch.setattr(json_bodies, "BIG_BODY", 64 * 1024)
        assert big == small and big[0] in (400, 422)


def test_a_synthea_upload_is_read_off_the_loop_and_echoes_the_bytes_stored(
    server: Server, api: httpx.Client
) -> None:
    path = next((FIXTURES / "fhir" / "synthea" / "hiv-2021").glob("*.json"))
    raw = path.read_bytes()
    assert len(raw) > json_bodies.BIG_BODY
    body = b'{"name": "' + unique("synthea").encode() + b'", "type": "fhir", "data": ' + raw + b"}"
    response = api.post("/datasets", content=body, headers={"Content-Type": "application/json"})
    created = ok(response, 201)
    bundle = json.loads(raw)
    assert created["data"] == bundle
    assert list(created) == ["id", "name", "type", "data", "created_at", "updated_at", "entities"]
    assert ok(api.get(f"/datasets/{created['id']}")) == created
    assert orjson.dumps(bundle) in response.content  # the stored text, as it is
    with server.database.reading() as session:
        from assay.store.models import Dataset

        row = session.get(Dataset, created["id"])
        assert row is not None and row.content_hash == content_hash(bundle)


# -- the pieces ---------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(JSON_LIKE, st.sampled_from([None, 2]))
def test_loads_is_json_loads(value: Any, indent: int | None) -> None:
    try:
        raw = json.dumps(value, indent=indent).encode()
    except ValueError:
        return
    parsed, strict = json_bodies.loads(raw)
    assert _same(parsed, json.loads(raw))
    if strict:  # orjson's value: strict JSON, so only a NUL can be wrong with it
        assert _problem(json_bodies.body_problem(parsed, strict=True, raw=raw)) == _problem(
            json_bodies.body_problem(parsed)
        )


@st.composite
def _nested(draw: st.DrawFn) -> Any:
    """JSON nested around `MAX_JSON_DEPTH`: lists and objects, empty or not, with siblings."""
    depth = draw(st.integers(json_bodies.MAX_JSON_DEPTH - 3, json_bodies.MAX_JSON_DEPTH + 3))
    value: Any = draw(st.sampled_from([[], {}, 1, "x", [1.5], {"k": None}]))
    for _ in range(depth - 1):
        sibling = draw(st.sampled_from([None, 2, "s", [], {}]))
        if draw(st.booleans()):
            value = [sibling, value] if draw(st.booleans()) else [value]
        else:
            value = {"s": sibling, "v": value}
    return value


@settings(max_examples=200, deadline=None)
@given(st.one_of(_nested(), JSON_LIKE))
def test_the_rendering_decides_the_depth_as_the_walk_does(value: Any) -> None:
    """`_decode` bounds the depth by orjson's refusal to write past its limit (with the value
    wrapped in lists): when it says, it says what `nested_deeper_than` says."""
    try:
        raw = json.dumps(value).encode()
    except ValueError:
        return
    parsed, _, too_deep = json_bodies._decode(raw)
    if too_deep is not None:
        assert too_deep == nested_deeper_than(parsed)


def test_orjson_writes_exactly_the_depth_decode_counts_on() -> None:
    """At `_ORJSON_DEPTH` levels orjson writes, one more it refuses (so an orjson that changed
    its limit is measured again at import, not trusted)."""
    deepest: Any = []
    for _ in range(json_bodies._ORJSON_DEPTH - 1):
        deepest = [deepest]
    orjson.dumps(deepest)
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps([deepest])
    at_limit = json.dumps({"a": [[]] * 2}).replace("[]", "[" * 98 + "]" * 98)
    assert json_bodies._decode(at_limit.encode())[2] is False  # 100 levels: allowed
    deeper = at_limit.replace("[[", "[[[", 1).replace("]]", "]]]", 1).encode()
    value, _, too_deep = json_bodies._decode(deeper)
    assert too_deep is None  # not written: the walk decides, and refuses it
    assert isinstance(json_bodies.body_problem(value, too_deep=too_deep), BadRequest)


def _problem(error: Exception | None) -> Any:
    return None if error is None else (type(error), str(error), getattr(error, "details", None))


@pytest.mark.parametrize(
    "raw",
    [b"NaN", b"[Infinity]", b"1e400", b'"\\ud800"', b"18446744073709551616", b"-9223372036854775809",
     b"123456789012345678901.5", b"\xef\xbb\xbf{}", b"01", b"[1,]", b'{"a":1,"b":2,"a":3}'],
)  # fmt: skip
def test_loads_gives_what_json_loads_gives_or_raises_what_it_raises(raw: bytes) -> None:
    try:
        expected: Any = json.loads(raw)
    except ValueError as error:
        with pytest.raises(type(error)):
            json_bodies.loads(raw)
        return
    parsed, _ = json_bodies.loads(raw)
    assert _same(parsed, expected) and (not isinstance(parsed, dict) or list(parsed) == list(expected))


@given(st.binary(max_size=60), st.sampled_from([(b"e+", 1), (b"\\u0000", 0)]), st.integers(1, 3))
def test_contains_is_in(text: bytes, needle_rare: tuple[bytes, int], jumps: int) -> None:
    needle, rare = needle_rare
    text = text.replace(b"a", needle[:2]).replace(b"b", needle)
    original = json_bodies._JUMPS
    json_bodies._JUMPS = jumps  # past the jumps, the plain search decides
    try:
        assert json_bodies._contains(text, needle, rare) == (needle in text)
    finally:
        json_bodies._JUMPS = original


def _walked_deeper_than(value: Any, limit: int) -> bool:
    """The node-by-node walk `nested_deeper_than` was (the definition)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


@settings(max_examples=300)
@given(JSON_LIKE, st.integers(1, 6))
def test_the_level_walk_agrees_with_the_node_walk(value: Any, limit: int) -> None:
    assert nested_deeper_than(value, limit) == _walked_deeper_than(value, limit)


def test_the_level_walk_at_the_limit() -> None:
    nested: Any = 1
    for level in range(100):  # 100 levels of arrays and objects in turn
        nested = {"a": nested} if level % 2 else [nested]
    assert _walked_deeper_than(nested, 100) == nested_deeper_than(nested, 100) is False
    assert _walked_deeper_than([nested], 100) == nested_deeper_than([nested], 100) is True
    assert not nested_deeper_than("text") and not nested_deeper_than([]) and not nested_deeper_than({})


def test_a_paused_collection_freezes_nothing_unless_a_bulk_load_overlapped() -> None:
    frozen = gc.get_freeze_count()
    with memory.collection_paused():
        kept = [{"a": [i]} for i in range(1000)]
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    loads = memory.bulk_loads
    with memory.collection_paused():
        with memory.bulk_loading():
            kept += [{"b": [i]} for i in range(1000)]
        assert not gc.isenabled()  # the pause still runs
    assert gc.isenabled() and gc.get_freeze_count() >= frozen + 1000
    assert memory.bulk_loads == loads + 1


def test_big_json_columns_are_compressed_with_lz4_on_postgresql(server: Server) -> None:
    """pglz cost 24.8 ms per MB of a Synthea bundle in the PostgreSQL backend, lz4 5.6 (0010); layer
    rows by COPY 343-360 ms pglz, 216-230 lz4 (0011); 9,454 event rows re-inserted took 605 ms with
    pglz, 258 with lz4 (0012)."""
    if server.backend != "postgres":
        pytest.skip("TOAST compression is PostgreSQL's")
    from sqlalchemy import text

    with server.database.reading() as session:
        if not session.execute(
            text("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        ).scalar():
            pytest.skip("this PostgreSQL has no lz4")
        methods = session.execute(
            text(
                "SELECT attrelid::regclass::text, attname, attcompression FROM pg_attribute "
                "WHERE (attname = 'data' AND attrelid IN ('datasets'::regclass, "
                "'benchmark_version_datasets'::regclass)) "
                "OR (attname IN ('request', 'response') AND attrelid = 'sandbox_events'::regclass) "
                "OR (attname = 'body' AND attrelid = 'fhir_layer_resources'::regclass)"
            )
        ).all()
    assert sorted(methods) == [
        ("benchmark_version_datasets", "data", "l"),
        ("datasets", "data", "l"),
        ("fhir_layer_resources", "body", "l"),
        ("sandbox_events", "request", "l"),
        ("sandbox_events", "response", "l"),
    ]
