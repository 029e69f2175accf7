"""JSON that every backend and every client can hold (SPEC §5: bad input is a 4xx, never a 500).

Python's `json.loads` accepts more than RFC 8259 JSON: the literals `NaN`, `Infinity` and
`-Infinity`, numbers that overflow to an infinite float (`1e999`), and `\\ud800`-style escapes that
decode to a lone UTF-16 surrogate. Stored, each breaks something later: PostgreSQL's `json` refuses
NaN (the insert fails after other work committed), a lone surrogate cannot be encoded as UTF-8, so
every response or snapshot that includes it answers 500, and `json.dumps` writes `NaN`, which strict
JSON clients cannot read. Bodies are checked once where they enter (the API's body dependency, the
FHIR surface, the event log) and refused or kept as text.

`might_not_be_strict(raw)` is a byte scan (a C regex) that is false for almost every real body, so
the walk of the parsed value runs only for bodies that mention one of the suspects.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["might_not_be_strict", "not_strict_json", "strict_json_problem"]

_SUSPECTS = re.compile(
    rb"NaN|Infinity|\\u[dD][89a-fA-F]|[:,\[]\s*-?[0-9.]+[eE]\+?[0-9]{3}|[:,\[]\s*-?[0-9]{200}"
)
"""Every non-strict body contains one of these: the two literals, a surrogate escape, or a number
(where JSON puts one: after `:`, `,` or `[`) with a three-digit exponent or a 200-digit integer
part. A number overflows past `sys.float_info.max` (~1.8e308) only with an exponent of 100 or more
or, with a two-digit exponent (at most 99), an integer part of more than 200 digits. Ids and hex
digests inside strings (`…4e123…`) do not trigger the walk."""


def might_not_be_strict(raw: bytes) -> bool:
    """False when `raw` certainly parses to strict JSON (if it parses at all)."""
    return _SUSPECTS.search(raw) is not None


def not_strict_json(value: Any) -> tuple[str, str] | None:
    """`(dotted key path, reason)` of the first value that is not strict JSON (a non-finite number,
    a string or key with a lone surrogate), or None. The path is `""` for the top-level value and
    never holds a surrogate itself. Iterative, so any nesting depth is safe.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not key.isascii() and _has_lone_surrogate(key):
                    return _dotted((*where, key)), _SURROGATE
                stack.append((child, (*where, key)))
        elif isinstance(item, list):
            stack.extend((child, (*where, str(i))) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return _dotted(where), "NaN, Infinity and numbers too large for a double are not JSON numbers"
        elif isinstance(item, str) and not item.isascii() and _has_lone_surrogate(item):
            return _dotted(where), _SURROGATE
    return None


def strict_json_problem(raw: bytes, value: Any) -> tuple[str, str] | None:
    """`not_strict_json(value)` for `value` parsed from `raw`, skipping the walk when the bytes say
    it cannot find anything."""
    return not_strict_json(value) if might_not_be_strict(raw) else None


_SURROGATE = "a lone UTF-16 surrogate escape (\\ud800-\\udfff) is not Unicode text"


def _dotted(where: tuple[str, ...]) -> str:
    return ".".join(part.encode("utf-8", "backslashreplace").decode("utf-8") for part in where)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
