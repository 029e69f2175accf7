"""Field operators and the comparison rules behind them (docs/assertions.md).

The vocabulary is FHIR TestScript's `assert.operator` plus `greaterOrEqual`, `lessOrEqual`,
`matches` (unanchored RE2 search: linear time on any input, so an agent-influenced value cannot
make a pattern run away) and `exists`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Literal, get_args

import re2

from assay.core.values import Reading, is_empty

__all__ = [
    "NO_EXPECTED",
    "OPERATORS",
    "FieldOutcome",
    "InvalidPattern",
    "Operator",
    "compile_pattern",
    "evaluate",
    "values_equal",
]

Operator = Literal[
    "equals",
    "notEquals",
    "in",
    "notIn",
    "greaterThan",
    "lessThan",
    "greaterOrEqual",
    "lessOrEqual",
    "empty",
    "notEmpty",
    "contains",
    "notContains",
    "matches",
    "exists",
]
OPERATORS: tuple[str, ...] = get_args(Operator)
NO_EXPECTED = frozenset({"empty", "notEmpty", "exists"})
LIST_EXPECTED = frozenset({"in", "notIn"})


@dataclass(frozen=True, slots=True)
class FieldOutcome:
    passed: bool
    error: str | None = None
    """Why the field could not be judged (an invalid pattern), shown in evidence."""


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


class InvalidPattern(ValueError):
    """A `matches` pattern RE2 rejects."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """Compile an RE2 pattern once; raise `InvalidPattern` with RE2's reason when invalid."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidPattern(str(reason)) from None


def evaluate(operator: str, expected: Any, reading: Reading) -> FieldOutcome:
    """Decide one field assertion on what was read."""
    values = reading.values
    if operator == "exists":
        return FieldOutcome(reading.found)
    if operator == "empty":
        return FieldOutcome(all(is_empty(v) for v in values))
    if operator == "notEmpty":
        return FieldOutcome(any(not is_empty(v) for v in values))
    if operator == "equals":
        return FieldOutcome(_equals(expected, reading))
    if operator == "notEquals":
        return FieldOutcome(not _equals(expected, reading) if values else expected is not None)
    if operator in LIST_EXPECTED:
        options = as_list(expected)
        hit = [any(values_equal(v, option) for option in options) for v in values]
        return FieldOutcome(any(hit) if operator == "in" else not any(hit))
    if operator in ("contains", "notContains"):
        found = _contains(expected, reading)
        return FieldOutcome(found if operator == "contains" else not found)
    if operator == "matches":
        try:
            pattern = compile_pattern(str(expected))
        except InvalidPattern as exc:
            return FieldOutcome(False, f"invalid regular expression {expected!r}: {exc}")
        texts = (_text(v) for v in values if v is not None and not isinstance(v, (list, dict)))
        return FieldOutcome(any(pattern.search(text) for text in texts))
    if operator in _ORDERING:
        test = _ORDERING[operator]
        return FieldOutcome(any(not is_empty(v) and test(_order(v, expected)) for v in values))
    return FieldOutcome(False, f"unknown operator {operator!r}")


def as_list(expected: Any) -> list[Any]:
    if isinstance(expected, list):
        return expected
    if isinstance(expected, str):
        return [part.strip() for part in expected.split(",")]
    return [expected]


def _equals(expected: Any, reading: Reading) -> bool:
    """`equals` holds when any value equals; `null` matches an empty or absent value."""
    if expected is None:
        return any(is_empty(v) for v in reading.values) if reading.values else True
    if isinstance(expected, (list, dict)):
        return values_equal(reading.actual, expected)
    return any(values_equal(v, expected) for v in reading.values)


def _contains(expected: Any, reading: Reading) -> bool:
    if isinstance(reading.actual, list) and any(values_equal(v, expected) for v in reading.actual):
        return True
    needle = _text(expected)
    return any(isinstance(v, str) and needle in v for v in reading.values)


def values_equal(actual: Any, expected: Any) -> bool:
    """Equality by the comparison rules of docs/assertions.md, deep for objects and arrays."""
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(values_equal(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(values_equal(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if expected is None or actual is None:
        return is_empty(actual) and is_empty(expected)
    if isinstance(actual, (dict, list)):
        return False
    if isinstance(expected, bool) or isinstance(actual, bool):
        return _text(actual).strip().lower() == _text(expected).strip().lower()
    if isinstance(expected, (int, float)) or isinstance(actual, (int, float)):
        a, e = _number(actual), _number(expected)
        if a is not None and e is not None:
            return a == e
        return False
    a_text, e_text = str(actual).strip(), str(expected).strip()
    if a_text == e_text:
        return True
    a_instant, e_instant = _instant(a_text), _instant(e_text)
    return a_instant is not None and a_instant == e_instant


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _number(value: Any) -> Decimal | None:
    """A finite number, or None. NaN and infinities (Python's `json` reads `NaN`) are not numbers
    here: `Decimal` NaN raises on ordering, and a check must never raise on bad data."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if isinstance(value, str):
        text = value.strip()
        if _NUMERIC.fullmatch(text):
            try:
                return Decimal(text)
            except InvalidOperation:
                return None
    return None


_NUMERIC = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_FULL_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})")


_HL7_INSTANT = re.compile(r"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2}(?:\.\d+)?)?([+-]\d{2})(\d{2})")


def _instant(text: str) -> datetime | None:
    """A full date-time with an offset, as an aware instant; anything else is None.

    ISO 8601 (`2024-03-15T10:30:00-05:00`) or HL7/X12 (`20240315103000-0500`), minutes at least.
    """
    if not _FULL_INSTANT.fullmatch(text):
        hl7 = _HL7_INSTANT.fullmatch(text)
        if hl7 is None:
            return None
        year, month, day, hour, minute, second, zone_hours, zone_minutes = hl7.groups()
        text = f"{year}-{month}-{day}T{hour}:{minute}:{second or '00'}{zone_hours}:{zone_minutes}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


_FHIR_DATE = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?"
)
_HL7_DATE = re.compile(r"(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(?:\.\d+)?([+-]\d{4})?")


def date_parts(text: str) -> tuple[int, ...] | None:
    """`YYYY-MM-DD…` or `YYYYMMDD[HHMM[SS]]` as (Y, M, D, h, m, s) at its own precision, UTC."""
    text = text.strip()
    fhir = _FHIR_DATE.fullmatch(text)
    if fhir:
        parts, zone = [g for g in fhir.groups()[:6] if g is not None], fhir.group(7)
    else:
        hl7 = _HL7_DATE.fullmatch(text)
        if not hl7 or len(text) < 8:
            return None
        parts, zone = [g for g in hl7.groups()[:6] if g is not None], hl7.group(7)
        if zone:
            zone = f"{zone[:3]}:{zone[3:]}"
    numbers = [int(p) for p in parts]
    if len(numbers) >= 5 and zone:
        try:
            year, month, day, hour, minute, *rest = numbers
            offset = datetime.fromisoformat(f"2000-01-01T00:00{zone}").tzinfo
            moment = datetime(year, month, day, hour, minute, rest[0] if rest else 0, tzinfo=offset)
        except ValueError:
            return None
        utc = moment.astimezone(UTC)
        numbers = [utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second][: len(numbers)]
    return tuple(numbers)


def _order(actual: Any, expected: Any) -> int:
    """-1, 0 or 1: numbers numerically, dates at the coarser precision, else by code point.

    Two digit-only calendar dates (`20240315`, `202403151030`) are dates although they also read
    as numbers: numerically `20240315` < `202403141200`, as dates it is the later day.
    """
    if not (_digit_date(actual) and _digit_date(expected)):
        a_num, e_num = _number(actual), _number(expected)
        if a_num is not None and e_num is not None:
            return (a_num > e_num) - (a_num < e_num)
    a_text, e_text = _text(actual).strip(), _text(expected).strip()
    a_date, e_date = date_parts(a_text), date_parts(e_text)
    if a_date is not None and e_date is not None:
        n = min(len(a_date), len(e_date))
        a_cut, e_cut = a_date[:n], e_date[:n]
        return (a_cut > e_cut) - (a_cut < e_cut)
    return (a_text > e_text) - (a_text < e_text)


_DIGIT_DATE = re.compile(r"\d{8}(?:\d{2}){0,3}")


def _digit_date(value: Any) -> bool:
    """A string `YYYYMMDD[HH[MM[SS]]]` that names a real calendar moment (HL7 DTM, X12 D8)."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if not _DIGIT_DATE.fullmatch(text):
        return False
    hour, minute, second = (int(text[i : i + 2] or 0) for i in (8, 10, 12))
    try:
        datetime(int(text[:4]), int(text[4:6]), int(text[6:8]), hour, minute, second)
    except ValueError:
        return False
    return True


_ORDERING = {
    "greaterThan": lambda c: c > 0,
    "lessThan": lambda c: c < 0,
    "greaterOrEqual": lambda c: c >= 0,
    "lessOrEqual": lambda c: c <= 0,
}
