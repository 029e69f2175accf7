"""JSON that every backend and every client can hold (docs/api.md: bad input is a 4xx, never a 500).

Python's `json.loads` accepts more than RFC 8259 JSON: the literals `NaN`, `Infinity` and
`-Infinity`, numbers that overflow to an infinite float (`1e999`), and `\\ud800`-style escapes that
decode to a lone UTF-16 surrogate. Stored, each breaks something later: PostgreSQL's `json` refuses
NaN (the insert fails after other work committed), a lone surrogate cannot be encoded as UTF-8, so
every response or snapshot that includes it answers 500, and `json.dumps` writes `NaN`, which strict
JSON clients cannot read. Bodies are checked once where they enter (the API's body dependency, the
FHIR surface, the event log) and refused or kept as text.

The check is the C encoder refusing what it cannot write (`allow_nan=False`, then UTF-8): exact,
and about as costly as the `json.loads` it follows (one POST of the 18 Synthea fixture files as one
4.2 MB dataset: 39 ms, the parse 37 ms). A byte pre-scan came first: it cost 2.3 times the parse
on a body it found nothing in, and it matched 17 of those 18 files (`urn:uuid:74e000…` reads as a
number with a three-digit exponent), so the Python walk ran too (that POST: 67 ms). The walk
(`not_strict_json`) now runs only to name the key of a refused body.

For big datasets the encoder is orjson, about ten times faster than `json.dumps` on FHIR
bundles (a 1,024-patient upload serialised each body three times: the check, `content_hash` and
the JSON column's bind). orjson writes a few things differently from `json.dumps`, and each is
routed back to `json.dumps` so that no answer changes: NaN and Infinity become `null` (so output
with a `null` token is written again by `json.dumps`); integers beyond 64 bits and lone
surrogates raise; and floats below 1e-4 or with an exponent are spelled differently, which only
matters for the content hash (see `content_hash`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson

__all__ = [
    "NUL_TEXT",
    "JsonText",
    "content_hash",
    "json_bytes",
    "json_bytes_and_hash",
    "json_text",
    "not_strict_json",
    "serialize_json",
    "storable_json_problem",
    "strict_json_problem",
]


class JsonText(str):
    """Strict JSON text the server has already written (a FHIR response it rendered), bound to a
    JSON column as it is: `serialize_json` passes it through instead of parsing and re-encoding
    it (the event log decoded, walked and re-encoded every response body it stored)."""

    __slots__ = ()


_NULL_TOKEN = re.compile(rb"null(?:[,\]}]|$)")
r"""A `null` value in orjson's compact output (it may have been NaN or Infinity). A string that
holds `null,` also matches, which costs a `json.dumps` and changes nothing; a pattern with a
literal head, because Python's `re` scans for it at C speed (`[\[:,]null` took 12 ms per MB)."""

_EXPONENT = re.compile(rb"e[-+][0-9]+(?:[,\]}]|$)")
"""A number with an exponent, which orjson spells apart from `float.__repr__` (`1.5e-7` against
`1.5e-07`): orjson always signs the exponent, and a number in compact output ends the text or is
followed by `,`, `]` or `}`. A string holding such a token (`"5e-7,"`) also matches, at the cost of
a `json.dumps`; `urn:uuid:…5e-4…`, which Synthea is full of, does not."""


def _spelled_apart(raw: bytes) -> bool:
    """Whether orjson's `raw` may hold a number `json.dumps` writes differently: an exponent, or a
    float below 1e-4 (orjson `0.00001`, `float.__repr__` `1e-05`), or NaN/Infinity (`null`)."""
    return (
        b"0.0000" in raw or bool(_EXPONENT.search(raw)) or (b"null" in raw and bool(_NULL_TOKEN.search(raw)))
    )


_PASSTHROUGH = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""Types `json.dumps` refuses are refused here too (a `TypeError`), not written by orjson."""

_ORJSON_REFUSES = (orjson.JSONEncodeError, TypeError)
"""What orjson raises where `json.dumps` may still write: an int beyond 64 bits, a lone
surrogate, a non-string key, nesting past 255 levels."""


def json_text(value: Any) -> str:
    """`value` as JSON text that `json.loads` reads back to what `json.dumps(value)` would:
    orjson's compact UTF-8 output, else (see the module docstring) `json.dumps`'s."""
    return json_bytes(value).decode()


def json_bytes(value: Any) -> bytes:
    """`json_text(value)`, UTF-8 encoded (what a response carries; `json.dumps` writes ASCII)."""
    try:
        raw = orjson.dumps(value, option=_PASSTHROUGH)
    except _ORJSON_REFUSES:
        return json.dumps(value).encode()
    if b"null" in raw and _NULL_TOKEN.search(raw):  # maybe NaN or Infinity
        return json.dumps(value).encode()
    return raw


def serialize_json(value: Any) -> str:
    """The engines' `json_serializer`: `json_text`, except that a `JsonText` is already JSON."""
    if type(value) is JsonText:
        return str.__str__(value)
    return json_text(value)


def content_hash(value: Any) -> str:
    """sha256 (hex) of `value`'s canonical JSON (keys sorted, no spaces, UTF-8): the same for every
    JSON round trip of the same content, so a dataset is hashed once when it is stored and `start`
    compares hashes instead of serialising the data again.

    The canonical text is `json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`, as every stored hash was computed. orjson writes the same bytes (keys
    sorted by code point alike) except for some floats, NaN/Infinity and what it refuses; output
    that may hold one of those is hashed from `json.dumps` instead
    (`test_json_values.py` checks the two agree on arbitrary JSON)."""
    try:
        raw: bytes | None = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | _PASSTHROUGH)
    except _ORJSON_REFUSES:
        raw = None
    if raw is None or _spelled_apart(raw):
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
        )
        raw = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def json_bytes_and_hash(value: Any) -> tuple[bytes, str]:
    """(`json_bytes(value)`, `content_hash(value)`), with the text checks made once: orjson's
    sorted and unsorted renderings hold the same number and `null` tokens, so when the unsorted
    one has nothing `json.dumps` would spell apart, neither has (a new dataset is rendered both
    ways, and checking each cost 2.4 ms per MB of a Synthea upload)."""
    try:
        raw = orjson.dumps(value, option=_PASSTHROUGH)
        ordered = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | _PASSTHROUGH)
    except _ORJSON_REFUSES:
        return json_bytes(value), content_hash(value)
    if _spelled_apart(raw):
        return json_bytes(value), content_hash(value)
    return raw, hashlib.sha256(ordered).hexdigest()


def strict_json_problem(value: Any) -> tuple[str, str] | None:
    """`(dotted key path, reason)` of the first value in `value` (parsed JSON) that is not strict
    JSON, or None; only a value that has one pays for the walk that names it."""
    return _problem(value, nul=False)


def storable_json_problem(value: Any) -> tuple[str, str] | None:
    """`strict_json_problem`, plus a NUL (U+0000) in any string or key: what the API's tables take.

    PostgreSQL `text` holds no NUL (psycopg refuses the insert: a 422 with a misleading message
    and no key) while SQLite stores it, so the API refused it on one backend and kept it on the
    other. Refused where bodies enter, the answer is the same on both. The FHIR surface
    keeps plain `strict_json_problem`: it stores resources as JSON text, where a NUL is the
    escape `\\u0000`, the same on both backends."""
    return _problem(value, nul=True)


def _problem(value: Any, *, nul: bool) -> tuple[str, str] | None:
    try:
        raw = orjson.dumps(value, option=_PASSTHROUGH)
    except _ORJSON_REFUSES:  # a lone surrogate, a big int, deep nesting: the exact check below
        return _encoded_problem(value, nul=nul)
    if b"null" in raw and _NULL_TOKEN.search(raw):  # NaN and Infinity are written as null
        return _encoded_problem(value, nul=nul)
    if nul and b"\\u0000" in raw:  # orjson escapes NUL too; a literal `\\u0000` costs one walk
        return not_strict_json(value, nul=True)
    return None


def _encoded_problem(value: Any, *, nul: bool) -> tuple[str, str] | None:
    """The exact check: the standard encoder refusing what it cannot write."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, check_circular=False)
        text.encode("utf-8")
    except ValueError:  # a non-finite float; UnicodeEncodeError (a lone surrogate) is a ValueError
        return not_strict_json(value, nul=nul)
    except RecursionError:  # the encoder recurses; callers bound depth first, the walk needs no bound
        return not_strict_json(value, nul=nul)
    if nul and "\\u0000" in text:  # the encoder escapes NUL; a literal `\\u0000` costs one walk
        return not_strict_json(value, nul=True)
    return None


def not_strict_json(value: Any, *, nul: bool = False) -> tuple[str, str] | None:
    """`(dotted key path, reason)` of the first value that is not strict JSON (a non-finite number,
    a string or key with a lone surrogate; with `nul`, or a NUL), or None. The path is `""` for the
    top-level value and never holds a surrogate or a NUL itself. Iterative, so any nesting depth is
    safe.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                reason = _text_problem(key, nul)
                if reason:
                    return _dotted((*where, key)), reason
                stack.append((child, (*where, key)))
        elif isinstance(item, list):
            stack.extend((child, (*where, str(i))) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return _dotted(where), "NaN, Infinity and numbers too large for a double are not JSON numbers"
        elif isinstance(item, str):
            reason = _text_problem(item, nul)
            if reason:
                return _dotted(where), reason
    return None


def _text_problem(text: str, nul: bool) -> str | None:
    if nul and "\x00" in text:
        return NUL_TEXT
    if not text.isascii() and _has_lone_surrogate(text):
        return _SURROGATE
    return None


_SURROGATE = "a lone UTF-16 surrogate escape (\\ud800-\\udfff) is not Unicode text"
NUL_TEXT = "a NUL character (\\u0000) cannot be stored"


def _dotted(where: tuple[str, ...]) -> str:
    return ".".join(
        part.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00") for part in where
    )


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
