"""`store.json_values`: the encoder's check agrees with the walk that names the offending key
(property test over hypothesis-generated JSON) and leaves the walk off ordinary FHIR bodies; the
API refuses such bodies with 422 naming the key (SPEC §5) instead of storing them or answering 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.store import json_values
from assay.store.json_values import not_strict_json, strict_json_problem
from tests.conftest import FIXTURES
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
def test_the_check_finds_what_the_walk_finds(value: Any) -> None:
    parsed = json.loads(json.dumps(value))  # ensure_ascii: a lone surrogate travels as a \\udXXX escape
    assert strict_json_problem(parsed) == not_strict_json(parsed)


def test_problems_are_named_by_their_dotted_path() -> None:
    assert not_strict_json({"a": [1, {"b": float("nan")}]}) == (
        "a.1.b",
        "NaN, Infinity and numbers too large for a double are not JSON numbers",
    )
    where, reason = not_strict_json({"x": {"\udc00": 1}}) or ("", "")
    assert where == "x.\\udc00" and "surrogate" in reason
    assert not_strict_json(float("inf")) is not None and not_strict_json(float("inf"))[0] == ""  # type: ignore[index]
    assert not_strict_json({"a": "Müller 😀", "b": 1e308, "c": [None, True]}) is None


@pytest.mark.parametrize(
    "raw",
    [b'{"a": 1' + b"0" * 300 + b"e10}", b'{"a": 1e400}', b"[-Infinity]", b'{"a": ["\\udbff"]}'],
    ids=["301-digit-mantissa", "three-digit-exponent", "infinity", "surrogate"],
)
def test_every_kind_of_problem_is_found(raw: bytes) -> None:
    assert strict_json_problem(json.loads(raw)) is not None


def test_any_depth_is_checked_without_recursing() -> None:
    deep: Any = float("nan")
    for _ in range(5000):
        deep = [deep]
    assert strict_json_problem(deep) == (".".join(["0"] * 5000), not_strict_json(float("nan"))[1])  # type: ignore[index]
    assert strict_json_problem(deep[0][0:0]) is None


def test_ordinary_fhir_bodies_are_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk is pure Python, about twice the parse of a large body; it runs only for a body
    that has a problem. The byte pre-scan it replaces sent 17 of the 18 Synthea fixture files
    through it (`urn:uuid:74e000…` looked like a number with a three-digit exponent)."""

    def walked(value: Any) -> None:
        raise AssertionError("an ordinary body was walked")

    monkeypatch.setattr(json_values, "not_strict_json", walked)
    for path in sorted((FIXTURES / "fhir" / "synthea").rglob("*.json")):
        assert strict_json_problem(json.loads(path.read_bytes())) is None, path.name


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
