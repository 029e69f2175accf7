"""`loads`: `json.loads` of bytes, through orjson wherever orjson's answer is the same.

Opening the 1,024-patient snapshot decodes 137k FHIR resources (300 MB): `json.loads` 2.7 s of CPU,
orjson 1.5 s. orjson decodes RFC 8259 JSON, and reads it differently from `json.loads` in these
ways only, each routed back to `json.loads` so that no result, warning or error changes:

- what orjson refuses and `json.loads` reads — `NaN`/`Infinity`, numbers that overflow to an
  infinite float (`1e999`), escapes of a lone UTF-16 surrogate, a UTF-8 byte order mark, UTF-16
  and UTF-32 text, surrogates encoded in UTF-8 — and what both refuse (the error message is
  `json.loads`'s): orjson raises, `json.loads` decides;
- integers beyond 64 bits, which orjson reads as floats without a word: text with a run of 19
  digits that may be an integer token (`_may_hold_long_integer`) goes to `json.loads`; a run
  inside a string rarely qualifies (every Synthea patient's narrative holds
  `Person seed: 8227062227814166433  Population…`, which sent each of them to `json.loads`);
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


def loads(data: bytes | str, *, shallow: bool = False) -> Any:
    """`json.loads(data)`: the same value, or the same exception. The one decoder of stored and
    archived JSON (snapshots, stored datasets).

    `shallow`: the caller knows `data` nests far less deep than `json.loads` reads — a stored
    dataset was refused at upload past 100 levels — so its `[`/`{` are not counted: a whole
    Synthea bundle has thousands of them, and the guard would send every one to `json.loads`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(data)
    classes = raw.translate(_CLASSES)
    if (not shallow and classes.count(b"[") >= DEEP) or _may_hold_long_integer(raw, classes):
        return json.loads(data)
    return value


def _may_hold_long_integer(raw: bytes, classes: bytes) -> bool:
    """Whether `raw` has a run of 19+ digits that may be an integer token: one preceded (past a `-`
    and whitespace) by `:`, `,`, `[` or the start of the text, and followed (past whitespace) by
    `,`, `]`, `}` or the end. Every integer token is; one that only looks like one inside a string
    costs a `json.loads`, nothing more. (A run followed by `.` or `e` is a float: both decoders
    round it alike.)"""
    found = classes.find(_LONG_INTEGER)
    while found >= 0:
        end = found + len(_LONG_INTEGER)
        while end < len(classes) and classes[end] == 0x30:
            end += 1
        before = found - 1
        while before >= 0 and raw[before] in b"- \t\r\n":
            before -= 1
        after = end
        while after < len(raw) and raw[after] in b" \t\r\n":
            after += 1
        if (before < 0 or raw[before] in b":,[") and (after == len(raw) or raw[after] in b",]}"):
            return True
        found = classes.find(_LONG_INTEGER, end)
    return False
