"""`store.json_values` on orjson (issue 9, big datasets): the content hash is byte for byte the one
every stored dataset was hashed with, stored text reads back to what `json.dumps` wrote, an
upload serialises its body with orjson only — `json.dumps` never sees it (counted, not timed) —
and `load_json` reads any JSON text to what `json.loads` reads.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.service.sandboxes.datasets import load_json
from assay.store import json_values
from assay.store.json_values import content_hash, json_bytes, json_bytes_and_hash, json_text, serialize_json
from tests.conftest import FIXTURES
from tests.service.builders import ok, unique

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.floats(min_value=1e15, max_value=1e25)
    | st.text(alphabet=st.characters(codec=None), max_size=8)
    | st.sampled_from([":null", ",1e5", "[0.00001", "\x00", "\u2028", "\x7f", '"\\'])
)
JSON_LIKE = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_SCALARS.filter(lambda x: isinstance(x, str)), inner, max_size=4)
    ),
    max_leaves=25,
)


def _hash_as_stored(value: Any) -> str:
    """`content_hash` as every stored hash was computed (before orjson): the definition."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=400, derandomize=True)
@given(JSON_LIKE)
def test_the_content_hash_is_the_one_stored_hashes_were_made_with(value: Any) -> None:
    assert content_hash(value) == _hash_as_stored(value)


@settings(max_examples=400, derandomize=True)
@given(JSON_LIKE)
def test_stored_text_reads_back_to_what_json_dumps_wrote(value: Any) -> None:
    assert _same(json.loads(json_text(value)), json.loads(json.dumps(value)))
    assert serialize_json(value) == json_text(value)


@settings(max_examples=400, derandomize=True)
@given(JSON_LIKE)
def test_text_and_hash_together_are_the_two_apart(value: Any) -> None:
    """`json_bytes_and_hash` checks the renderings once for both: the same bytes and hash."""
    try:
        expected = (json_bytes(value), content_hash(value))
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error)):
            json_bytes_and_hash(value)
        return
    assert json_bytes_and_hash(value) == expected


def test_fixture_hashes_are_pinned() -> None:
    """A stored hash must keep matching after any change here (or be migrated)."""
    bob = (
        FIXTURES
        / "fhir"
        / "synthea"
        / "hiv-2021"
        / "Bob965_Keeling57_3f6fd0bb-6cd3-eb3f-4401-cd38ace25f2b.json"
    )
    assert content_hash(json.loads(bob.read_bytes())) == (
        "3c8d280c12e25b6767ca296a46f42d3b2999a5d43dcfd3803a0f080fa31a7d4c"
    )
    mixed = {"b": [1e-05, 1.5e-07, 0.1, 2**70, "\u00e9\U0001f600", None], "a": {"z": True, "\ue000": -0.0}}
    assert content_hash(mixed) == "b8d66837436ca67201e6365a1ce484f988ee4728d96c9e24c316ffe2f6c59b55"


def test_what_json_dumps_refuses_is_still_refused() -> None:
    """orjson would write a datetime; `json.dumps` raised, and so does the serializer."""
    from datetime import datetime

    with pytest.raises(TypeError):
        json_text({"at": datetime(2026, 1, 1)})


def test_an_upload_is_never_serialised_by_json_dumps(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1,024-patient upload serialised each body three times with `json.dumps` (the storability
    check, `content_hash`, the JSON column's bind): 20-46% of its time. Now none of them does;
    `json.dumps` still runs for small things (the response envelope, other columns)."""
    bundle = json.loads((FIXTURES / "fhir" / "synthea" / "hiv-2021").glob("*.json").__next__().read_bytes())
    size = len(json.dumps(bundle))
    encoded: list[int] = []
    real = json_values.json.dumps

    def counting(value: Any, *args: Any, **kwargs: Any) -> str:
        text = real(value, *args, **kwargs)
        if len(text) > size // 2:
            encoded.append(len(text))
        return text

    monkeypatch.setattr(json_values.json, "dumps", counting)
    body = {"name": unique("big"), "type": "fhir", "data": bundle}
    created = ok(api.post("/datasets", content=real(body), headers={"Content-Type": "application/json"}), 201)
    assert created["data"] == bundle
    assert encoded == []
    monkeypatch.setattr(json_values.json, "dumps", real)
    assert ok(api.get(f"/datasets/{created['id']}"))["data"] == bundle


def _reads_alike(text: str) -> None:
    expected = json.loads(text)
    assert _same(load_json(text), expected)
    assert _same(load_json(text.encode("utf-8", "surrogatepass")), expected)


@settings(max_examples=400, derandomize=True)
@given(JSON_LIKE)
def test_load_json_reads_what_json_loads_reads(value: Any) -> None:
    """Every spelling the datasets may be stored in: orjson's, `json.dumps`'s (spaces, ASCII
    escapes: rows stored before orjson), indented."""
    for text in (json_text(value), json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        _reads_alike(text)


_NUMBER = st.from_regex(r"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][-+]?[0-9]{1,4})?\Z")


@settings(max_examples=600, derandomize=True)
@given(_NUMBER, st.sampled_from(["{}", "[{}]", '{{"a": {}}}', "[1,\n {}]", " {} ", '["x",{}]']))
def test_load_json_reads_numbers_as_json_loads_does(number: str, shape: str) -> None:
    """Integers beyond 64 bits stay integers, floats round alike, overflow is `inf` as before."""
    _reads_alike(shape.format(number))


@pytest.mark.parametrize(
    "text",
    [
        "18446744073709551616",
        "[1, -9223372036854775809]",
        '{"a": 123456789012345678901234567890}',
        '{"a":\n  [\t99999999999999999999]}',
        "[NaN, Infinity, -Infinity, 1e400]",
        '"\\ud800"',
        '{"a": 1, "a": 2}',
        '{"text": "seed: 8227062227814166433", "n": 18446744073709551615}',
        '{"text": "seed: 8227062227814166433 ", "n": [8227062227814166433]}',
        '{"text": "[8227062227814166433]"}',
        "-12345678901234567890",
    ],
)
def test_load_json_on_what_orjson_reads_differently(text: str) -> None:
    _reads_alike(text)


def test_a_synthea_bundle_is_read_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Synthea patient's narrative holds a 19-digit seed inside a string: that alone must not
    send the bundle to `json.loads` (counted, not timed)."""
    path = next((FIXTURES / "fhir" / "synthea" / "hiv-2021").glob("*.json"))
    text = path.read_text()
    assert "Person seed: " in text
    slow: list[int] = []
    real = json_values.json.loads
    monkeypatch.setattr(json_values.json, "loads", lambda t, *a, **k: slow.append(1) or real(t, *a, **k))
    assert load_json(text) == real(text)
    assert slow == []
