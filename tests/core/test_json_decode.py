"""`core.json_decode.loads` is `json.loads` on bytes: the same value (types included) or the same
exception, whichever of orjson and `json.loads` decoded it."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import FIXTURES

from assay.core import json_decode
from assay.core.json_decode import loads


def _typed(value: Any) -> Any:
    """`value` with every scalar tagged by its type (`1`, `1.0` and `True` are equal in Python),
    floats by their bits (`-0.0`, NaN)."""
    if isinstance(value, dict):
        return ("dict", [(key, _typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(item) for item in value])
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


def _outcome(decode: Any, data: bytes) -> Any:
    try:
        return ("value", _typed(decode(data)))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__, str(exc))


def _same(data: bytes) -> None:
    assert _outcome(loads, data) == _outcome(json.loads, data)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(_json, st.sampled_from([None, 1]))
def test_json_values_decode_as_json_loads_decodes_them(value: Any, indent: int | None) -> None:
    _same(json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8"))
    _same(json.dumps(value, indent=indent).encode("utf-8"))


@settings(max_examples=500, deadline=None)
@given(
    st.binary(max_size=40) | st.text(alphabet='{}[]",:0123456789.eE+-tfnrul \\u', max_size=40).map(str.encode)
)
def test_any_bytes_decode_or_fail_as_json_loads_does(data: bytes) -> None:
    _same(data)


@pytest.mark.parametrize(
    "text",
    [
        b"NaN",
        b"[Infinity, -Infinity]",
        b"1e400",
        b'"\\ud800"',
        b'"\\ud83d\\ude00"',
        b"\xef\xbb\xbf{}",
        '{"a": 1}'.encode("utf-16"),
        '"\ud800"'.encode("utf-8", "surrogatepass"),
        b"18446744073709551615",
        b"18446744073709551616",
        b"-9223372036854775808",
        b"-9223372036854775809",
        b'{"value": 123456789012345678901234567890}',
        b'{"a": 1, "b": 2, "a": 3}',
        b"-0",
        b"-0.0",
        b'"\\u0000"',
        b"[" * 600 + b"]" * 600,
        b"[" * 2000 + b"]" * 2000,
        b" \t\n{}\r\n",
        b"01",
        b"1.",
        b"",
    ],
)
def test_edge_cases_decode_as_json_loads_decodes_them(text: bytes) -> None:
    _same(text)


def test_big_integers_and_deep_nesting_are_left_to_json_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson reads an integer beyond 64 bits as a float: the guard sends it to `json.loads`."""
    big = loads(b'{"n": 123456789012345678901234567890}')["n"]
    assert isinstance(big, int) and big == 123456789012345678901234567890
    calls: list[bytes] = []
    monkeypatch.setattr(json_decode.json, "loads", lambda data: calls.append(data) or "json")
    assert loads(b'{"n": 1234567890123456789}') == "json"
    assert loads(b"[" * json_decode.DEEP + b"]" * json_decode.DEEP) == "json"
    assert loads(b'{"n": 123456789012345678, "f": 0.5}') == {"n": 123456789012345678, "f": 0.5}
    assert len(calls) == 2


def test_a_digit_run_inside_a_string_does_not_send_a_resource_to_json_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every Synthea Patient's narrative holds `Person seed: <19 digits>`; only a run that may be an
    integer token goes to `json.loads` (counted, not timed), and a real one still does."""
    bundle = json.loads(next((FIXTURES / "fhir" / "synthea" / "hiv-2021").glob("*.json")).read_text())
    [patient] = [e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Patient"]
    raw = json.dumps(patient).encode()
    assert b"Person seed: " in raw
    slow: list[int] = []
    real = json.loads
    monkeypatch.setattr(json_decode.json, "loads", lambda t, *a, **k: slow.append(1) or real(t, *a, **k))
    assert json_decode.loads(raw) == real(raw)
    assert slow == []
    assert json_decode.loads(b'{"seed": 18446744073709551616}') == {"seed": 2**64}
    assert slow == [1]
