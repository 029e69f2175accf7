"""FHIR dates as ranges, and the R4 date-prefix rules (docs/assertions.md; FHIR R4 search §3.1.1.4.5).

Every date, dateTime or instant is a half-open range `[low, high)` in integer microseconds since
the epoch, UTC, at the precision written: `2019` is the whole year, `2019-05-03T10:00` one minute.
A missing time zone means UTC (docs/assertions.md). A Period is `[start.low, end.high)` with an open end at
+∞ (and an open start at −∞).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "NEG_INF",
    "POS_INF",
    "DateRange",
    "date_range",
    "date_range_of",
    "matches_range",
    "micros",
    "now_micros",
]

NEG_INF = -(2**62)
POS_INF = 2**62
_DAY = 86_400_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_DATE = re.compile(
    r"^(?P<year>\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})"
    r"(?:T(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?P<fraction>\.\d+)?)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?)?)?)?$"
)


@dataclass(frozen=True, slots=True)
class DateRange:
    low: int
    """Inclusive, microseconds since the epoch (UTC)."""
    high: int
    """Exclusive."""


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros(moment: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is UTC, as a FHIR date without a zone is
    (docs/assertions.md)."""
    return _micros(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def date_range(text: str) -> DateRange | None:
    """The range a FHIR date/dateTime/instant covers, or None when it is not one."""
    match = _DATE.match(text.strip())
    if match is None:
        return None
    parts = match.groupdict()
    year = int(parts["year"])
    try:
        if parts["month"] is None:
            start = datetime(year, 1, 1, tzinfo=UTC)
            return DateRange(_micros(start), _micros(datetime(year + 1, 1, 1, tzinfo=UTC)))
        month = int(parts["month"])
        if parts["day"] is None:
            start = datetime(year, month, 1, tzinfo=UTC)
            end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
            return DateRange(_micros(start), _micros(end))
        day = int(parts["day"])
        if parts["hour"] is None:
            low = _micros(datetime(year, month, day, tzinfo=UTC))
            return DateRange(low, low + _DAY)
        moment = datetime(
            year, month, day, int(parts["hour"]), int(parts["minute"]), int(parts["second"] or 0), tzinfo=UTC
        )
    except ValueError:
        return None
    low = _micros(moment) - _offset_micros(parts["tz"])
    if parts["second"] is None:
        width = 60_000_000
    elif parts["fraction"]:
        digits = len(parts["fraction"]) - 1
        low += int(parts["fraction"][1:7].ljust(6, "0"))
        width = max(1, 10 ** max(0, 6 - digits))
    else:
        width = 1_000_000
    return DateRange(low, low + width)


def _offset_micros(tz: str | None) -> int:
    if not tz or tz == "Z":
        return 0
    sign = -1 if tz[0] == "-" else 1
    hours, minutes = int(tz[1:3]), int(tz[4:6])
    return sign * (hours * 3600 + minutes * 60) * 1_000_000


def date_range_of(value: Any, fhir_type: str | None) -> list[DateRange]:
    """Ranges of an element a date parameter indexes: a date string, Period or Timing."""
    if isinstance(value, str):
        found = date_range(value)
        return [found] if found else []
    if not isinstance(value, dict):
        return []
    if fhir_type == "Timing" or "event" in value or "repeat" in value:
        events = value.get("event")
        events = events if isinstance(events, list) else []  # stored as given: malformed indexes nothing
        ranges = [r for event in events if isinstance(event, str) if (r := date_range(event))]
        repeat = value.get("repeat")
        bounds = repeat.get("boundsPeriod") if isinstance(repeat, dict) else None
        if isinstance(bounds, dict):
            ranges.extend(date_range_of(bounds, "Period"))
        return ranges
    if "start" in value or "end" in value:
        start = date_range(value["start"]) if isinstance(value.get("start"), str) else None
        end = date_range(value["end"]) if isinstance(value.get("end"), str) else None
        return [DateRange(start.low if start else NEG_INF, end.high if end else POS_INF)]
    return []


def now_micros() -> int:
    return _micros(datetime.now(UTC))


def _approximate(search: DateRange, now: int) -> DateRange:
    """`ap`: widen by 10 % of the distance from now, at least one day (docs/assertions.md)."""
    distance = max(abs(now - search.low), abs(now - search.high))
    margin = max(distance // 10, _DAY)
    return DateRange(search.low - margin, search.high + margin)


def matches_range(prefix: str, search: DateRange, target: DateRange, now: int | None = None) -> bool:
    """R4 prefix semantics between the search value's range and a target range.

    eq: the search range contains the target; ne: it does not; gt/lt: the target reaches above /
    below the search range; ge/le: gt/lt or eq; sa/eb: the target lies wholly after / before it;
    ap: the ranges overlap once the search range is widened.
    """
    contains = search.low <= target.low and target.high <= search.high
    if prefix == "eq":
        return contains
    if prefix == "ne":
        return not contains
    if prefix == "gt":
        return target.high > search.high
    if prefix == "lt":
        return target.low < search.low
    if prefix == "ge":
        return target.high > search.high or contains
    if prefix == "le":
        return target.low < search.low or contains
    if prefix == "sa":
        return target.low >= search.high
    if prefix == "eb":
        return target.high <= search.low
    if prefix == "ap":
        wide = _approximate(search, now_micros() if now is None else now)
        return target.low < wide.high and target.high > wide.low
    raise ValueError(f"unknown prefix {prefix}")
