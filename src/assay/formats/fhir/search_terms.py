"""The typed form of a parsed FHIR search: one value class per parameter type, each
with how it matches, and the `ParsedSearch` of criteria, sort, chains and `_has` links that
`query.parse_search` builds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from assay.formats.fhir.dates import DateRange, matches_range
from assay.formats.fhir.parameters import SearchParameter
from assay.formats.fhir.values import QuantityValue

__all__ = [
    "SCANNED_MODIFIERS",
    "Chain",
    "CompositeQuery",
    "Criterion",
    "DateQuery",
    "Has",
    "MissingQuery",
    "NumberQuery",
    "OfTypeQuery",
    "ParsedSearch",
    "QuantityQuery",
    "QueryValue",
    "ReferenceQuery",
    "SortKey",
    "StringQuery",
    "TokenQuery",
    "UriQuery",
]


@dataclass(frozen=True, slots=True)
class MissingQuery:
    missing: bool


@dataclass(frozen=True, slots=True)
class TokenQuery:
    """`code`, `system|code`, `|code` (no system) or `system|` (any code of the system)."""

    code: str | None
    system: str | None = None
    system_given: bool = False

    def keys(self) -> tuple[Any, ...]:
        if not self.system_given:
            return ("c", self.code)
        if self.system is None:
            return ("n", self.code)
        if self.code is None:
            return ("s", self.system)
        return ("sc", self.system, self.code)


@dataclass(frozen=True, slots=True)
class StringQuery:
    text: str
    normalized: str


@dataclass(frozen=True, slots=True)
class ReferenceQuery:
    """`Type/id`, a bare `id` (with an optional `:Type` modifier) or an absolute URL's tail."""

    raw: str
    type: str | None
    id: str | None

    def keys(self) -> tuple[Any, ...]:
        if self.type and self.id:
            return ("l", f"{self.type}/{self.id}")
        if self.id:
            return ("i", self.id)
        if self.type:
            return ("none",)
        return ("r", self.raw)


@dataclass(frozen=True, slots=True)
class OfTypeQuery:
    """`identifier:of-type=system|code|value`: an Identifier whose `type` has that coding."""

    system: str | None
    code: str
    value: str


@dataclass(frozen=True, slots=True)
class UriQuery:
    uri: str


@dataclass(frozen=True, slots=True)
class DateQuery:
    prefix: str
    range: DateRange

    def matches(self, target: DateRange) -> bool:
        return matches_range(self.prefix, self.range, target)


@dataclass(frozen=True, slots=True)
class NumberQuery:
    """A number with its implicit precision range `[low, high)` (R4: `100` is [99.5, 100.5))."""

    prefix: str
    value: Decimal
    low: Decimal
    high: Decimal

    def matches_point(self, number: Decimal) -> bool:
        prefix = self.prefix
        if prefix == "eq":
            return self.low <= number < self.high
        if prefix == "ne":
            return not self.low <= number < self.high
        if prefix in ("gt", "sa"):
            return number > self.value
        if prefix in ("lt", "eb"):
            return number < self.value
        if prefix == "ge":
            return number >= self.value
        if prefix == "le":
            return number <= self.value
        margin = max(abs(self.value) / 10, (self.high - self.low) / 2)
        return self.value - margin <= number <= self.value + margin

    def matches_range(self, low: Decimal | None, high: Decimal | None) -> bool:
        if low is not None and low == high:
            return self.matches_point(low)
        prefix = self.prefix
        lo = low if low is not None else Decimal("-Infinity")
        hi = high if high is not None else Decimal("Infinity")
        contains = self.low <= lo and hi <= self.high
        checks = {
            "eq": contains,
            "ne": not contains,
            "gt": hi > self.value,
            "sa": lo > self.value,
            "lt": lo < self.value,
            "eb": hi < self.value,
            "ge": hi >= self.value,
            "le": lo <= self.value,
            "ap": lo <= self.high and hi >= self.low,
        }
        return checks[prefix]


@dataclass(frozen=True, slots=True)
class QuantityQuery:
    number: NumberQuery
    system: str | None
    code: str | None

    def matches(self, quantity: QuantityValue) -> bool:
        if self.code is not None:
            if self.system is not None:
                if quantity.system != self.system or quantity.code != self.code:
                    return False
            elif self.code not in (quantity.code, quantity.unit):
                return False
        elif self.system is not None and quantity.system != self.system:
            return False
        return self.number.matches_range(quantity.low, quantity.high)


@dataclass(frozen=True, slots=True)
class CompositeQuery:
    """One value of a composite parameter: a query per component, in the table's order."""

    components: tuple[tuple[str, Any], ...]
    """(component type, parsed value) pairs."""


QueryValue = (
    MissingQuery
    | OfTypeQuery
    | CompositeQuery
    | TokenQuery
    | StringQuery
    | ReferenceQuery
    | UriQuery
    | DateQuery
    | NumberQuery
    | QuantityQuery
)


@dataclass(frozen=True, slots=True)
class Criterion:
    """One AND-ed search parameter: its values are OR-ed."""

    parameter: SearchParameter
    key: str
    """As written: `name:exact`."""
    modifier: str | None
    values: tuple[QueryValue, ...]
    scanned: bool = False
    """Answered by reading each candidate resource (`modifiers.py`: composites, `:text`,
    `:of-type`, `:identifier`) rather than from the parameter's index; set once, at parse time."""


SCANNED_MODIFIERS = frozenset({"text", "of-type", "identifier"})


@dataclass(frozen=True, slots=True)
class SortKey:
    parameter: SearchParameter
    descending: bool


@dataclass(frozen=True, slots=True)
class Chain:
    """`subject:Patient.name=x` (R4 search.html §3.1.1.4.8.1 chained parameters): resources whose
    `parameter` references a match of one of `searches` (one per possible target type)."""

    parameter: SearchParameter
    key: str
    searches: tuple[ParsedSearch, ...]


@dataclass(frozen=True, slots=True)
class Has:
    """`_has:Observation:patient:code=x` (§3.1.1.4.8.2 reverse chaining): resources that a match of
    `search` references through its parameter `code`."""

    key: str
    code: str
    search: ParsedSearch


@dataclass(frozen=True, slots=True)
class ParsedSearch:
    resource_type: str
    criteria: tuple[Criterion, ...] = ()
    sort: tuple[SortKey, ...] = ()
    count: int | None = None
    includes: tuple[str, ...] = ()
    """`_include` and `_revinclude` values as written (`_revinclude:iterate=…` keeps its key)."""
    ignored: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Other result parameters (`_summary`, `_elements`, …), for a REST layer to honour."""
    links: tuple[Chain | Has, ...] = ()
    """Chained and `_has` parameters, each ANDed with the criteria."""
