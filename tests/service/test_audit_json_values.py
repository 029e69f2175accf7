"""`store.json_values`: the byte pre-scan never lets a non-strict body skip the walk, and the walk
names the offending key (property tests over hypothesis-generated JSON); the API refuses such
bodies with 422 naming the key (SPEC §5) instead of storing them or answering 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.store.json_values import might_not_be_strict, not_strict_json, strict_json_problem
from tests.service.builders import error

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None), max_size=8)
)
JSON_LIKE = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True)
@given(JSON_LIKE)
def test_the_prescan_never_hides_a_problem(value: Any) -> None:
    raw = json.dumps(value).encode()  # ensure_ascii: a lone surrogate is written as a \\udXXX escape
    parsed = json.loads(raw)
    if not_strict_json(parsed) is not None:
        assert might_not_be_strict(raw), raw
    assert strict_json_problem(raw, parsed) == not_strict_json(parsed)


def test_problems_are_named_by_their_dotted_path() -> None:
    assert not_strict_json({"a": [1, {"b": float("nan")}]}) == (
        "a.1.b",
        "NaN, Infinity and numbers too large for a double are not JSON numbers",
    )
    where, reason = not_strict_json({"x": {"\udc00": 1}}) or ("", "")
    assert where == "x.\\udc00" and "surrogate" in reason
    assert not_strict_json(float("inf")) is not None and not_strict_json(float("inf"))[0] == ""  # type: ignore[index]
    assert not_strict_json({"a": "Müller 😀", "b": 1e308, "c": [None, True]}) is None


def test_a_long_mantissa_with_a_short_exponent_is_walked() -> None:
    """301 digits times 1e10 overflows with no three-digit exponent and no 309-digit run."""
    raw = b'{"a": 1' + b"0" * 300 + b"e10}"
    assert might_not_be_strict(raw)
    assert strict_json_problem(raw, json.loads(raw)) is not None


def test_ordinary_bodies_skip_the_walk() -> None:
    assert not might_not_be_strict(b'{"id": "4e123456", "value": 12.5e2, "sha": "9e999"}')
    assert might_not_be_strict(b'{"value": 1e400}') and might_not_be_strict(b"[-Infinity]")


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/benchmarks", b'{"name": "\\udc00"}', "name"),
        ("/datasets", b'{"name": "n", "type": "fhir", "data": {"resourceType": "Bundle", "type": '
         b'"collection", "entry": [{"resource": {"resourceType": "Patient", "a": NaN}}]}}',
         "data.entry.0.resource.a"),
        ("/v1/benchmark-runs", b'{"benchmark": "\\ud800"}', "benchmark"),
        ("/v1/benchmark-runs", b'{"benchmark": "x", "agent": {"a": NaN}}', "agent.a"),
        ("/v1/benchmark-runs", b'{"benchmark": "x", "agent": {"\\udfff": 1e400}}', "agent.\\udfff"),
    ],
)  # fmt: skip
def test_api_bodies_refuse_json_that_is_not_strict(
    api: httpx.Client, path: str, body: bytes, key: str
) -> None:
    """Python's json reads NaN, Infinity, 1e400 and lone surrogates; stored, they were kept (SQLite),
    refused by PostgreSQL as "too large", or crashed the response (`/v1/benchmark-runs` answered 500
    or dropped the connection). Now a 422 naming the key, as for any value the database cannot hold."""
    response = api.post(path, content=body, headers={"Content-Type": "application/json"})
    assert list(error(response, 422, "VALIDATION_ERROR")) == [key]
