"""One search parameter of one resource type, indexed: values per resource plus exact lookups.

Token, reference and uri values are also keyed in a lookup table (`("sc", system, code)`,
`("l", "Patient/1")`, …) so the common searches are set unions, not scans; string values are
grouped by their normalized text, so a prefix scan walks distinct texts rather than resources.
Dates, numbers and quantities are compared per resource, over the candidates the cheaper
criteria left.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from assay.formats.fhir.dates import DateRange
from assay.formats.fhir.extract import Extractor
from assay.formats.fhir.parameters import SearchParameter
from assay.formats.fhir.references import ReferenceTarget
from assay.formats.fhir.search_terms import (
    Criterion,
    DateQuery,
    MissingQuery,
    NumberQuery,
    QuantityQuery,
    ReferenceQuery,
    StringQuery,
    TokenQuery,
    UriQuery,
)
from assay.formats.fhir.values import INDEXERS, PRIMITIVE_CODE, QuantityValue, normalize_text

__all__ = ["ParamIndex"]

_LOOKUP_TYPES = frozenset({"token", "reference", "uri"})
_UNKNOWN = object()


def _lookup_keys(kind: str, value: Any) -> Iterable[tuple[Any, ...]]:
    if kind == "token":
        system, code = value
        yield ("c", code)
        yield ("sc", system, code) if system else ("n", code)
        if system:
            yield ("s", system)
        elif system == PRIMITIVE_CODE:
            yield ("p", code)
    elif kind == "reference":
        target: ReferenceTarget = value
        yield ("r", target.raw)
        if target.local:
            yield ("l", target.local)
        if target.id:
            yield ("i", target.id)
    elif kind == "uri":
        yield ("r", value)


class ParamIndex:
    """The values of one parameter for every resource of one type."""

    def __init__(
        self, parameter: SearchParameter, extractor: Extractor, fallback: Callable[[str], list[Any]]
    ):
        self.parameter = parameter
        self.kind = parameter.type
        self._extract = extractor
        self._fallback = fallback
        """Values for a resource the expression finds nothing in (`_lastUpdated` → load time)."""
        self._to_values = INDEXERS[self.kind]
        self.values: dict[str, tuple[Any, ...]] = {}
        self._lookup: dict[tuple[Any, ...], set[str]] = defaultdict(set)
        self._texts: dict[str, set[str]] = defaultdict(set)
        self._exact: dict[str, set[str]] = defaultdict(set)
        self._sort_keys: dict[tuple[str, bool], Any] = {}
        """`sort_value` per (resource, descending), derived on the first `_sort` that needs it."""

    # -- maintenance ------------------------------------------------------------------------

    def add(self, rid: str, resource: dict[str, Any]) -> None:
        found: list[Any] = []
        for typed in self._extract(resource):
            found.extend(self._to_values(typed))
        if not found:
            found = self._fallback(rid)
        values = tuple(dict.fromkeys(found)) if self.kind != "quantity" else tuple(found)
        self.values[rid] = values
        if self.kind in _LOOKUP_TYPES:
            for value in values:
                for key in _lookup_keys(self.kind, value):
                    self._lookup[key].add(rid)
        elif self.kind == "string":
            for text in values:
                self._texts[normalize_text(text)].add(rid)
                self._exact[text].add(rid)

    def remove(self, rid: str) -> None:
        values = self.values.pop(rid, ())
        self._sort_keys.pop((rid, False), None)
        self._sort_keys.pop((rid, True), None)
        if self.kind in _LOOKUP_TYPES:
            for value in values:
                for key in _lookup_keys(self.kind, value):
                    _discard(self._lookup, key, rid)
        elif self.kind == "string":
            for text in values:
                _discard(self._texts, normalize_text(text), rid)
                _discard(self._exact, text, rid)

    # -- matching ---------------------------------------------------------------------------

    def referring(self, local: str) -> set[str]:
        """Ids whose reference values point at `local` (`Patient/1`): a chain's last step."""
        return self._lookup.get(("l", local), set())

    def is_lookup(self, criterion: Criterion) -> bool:
        """Answered from the lookup tables (cheap) rather than per candidate resource."""
        if isinstance(criterion.values[0], MissingQuery) or criterion.modifier == "not":
            return False
        return self.kind in ("token", "reference", "string") or (
            self.kind == "uri" and criterion.modifier is None
        )

    def matching(self, criterion: Criterion, among: Iterable[str]) -> set[str]:
        """Ids that satisfy the criterion; `among` (the candidates so far) bounds the scans."""
        first = criterion.values[0]
        if isinstance(first, MissingQuery):
            want_missing = first.missing
            return {rid for rid in among if (not self.values.get(rid)) == want_missing}
        by_lookup = criterion.modifier in (None, "not") or self.kind == "reference"
        if self.kind in _LOOKUP_TYPES and by_lookup:
            hits: set[str] = set()
            for value in criterion.values:
                assert isinstance(value, TokenQuery | ReferenceQuery | UriQuery)
                hits |= self._lookup.get(self._key(value), set())
                if isinstance(value, TokenQuery) and value.system and _implied_system(value):
                    hits |= self._lookup.get(("p", value.code), set())
            if criterion.modifier == "not":
                return {rid for rid in among if rid not in hits}
            return hits
        if self.kind == "string":
            return self._strings(criterion)
        test = self._predicate(criterion)
        return {rid for rid in among if any(test(v) for v in self.values.get(rid, ()))}

    def _key(self, value: TokenQuery | ReferenceQuery | UriQuery) -> tuple[Any, ...]:
        if isinstance(value, UriQuery):
            return ("r", value.uri)
        return value.keys()

    def _strings(self, criterion: Criterion) -> set[str]:
        hits: set[str] = set()
        for value in criterion.values:
            assert isinstance(value, StringQuery)
            if criterion.modifier == "exact":
                hits |= self._exact.get(value.text, set())
                continue
            wanted = value.normalized
            contains = criterion.modifier == "contains"
            for text, ids in self._texts.items():
                if (wanted in text) if contains else text.startswith(wanted):
                    hits |= ids
        return hits

    def _predicate(self, criterion: Criterion) -> Callable[[Any], bool]:
        queries = criterion.values
        if self.kind == "date":

            def date_test(target: DateRange) -> bool:
                return any(q.matches(target) for q in queries if isinstance(q, DateQuery))

            return date_test
        if self.kind == "number":

            def number_test(target: Decimal) -> bool:
                return any(q.matches_point(target) for q in queries if isinstance(q, NumberQuery))

            return number_test
        if self.kind == "quantity":

            def quantity_test(target: QuantityValue) -> bool:
                return any(q.matches(target) for q in queries if isinstance(q, QuantityQuery))

            return quantity_test
        below = criterion.modifier == "below"

        def uri_test(target: str) -> bool:
            return any(
                isinstance(q, UriQuery) and (target.startswith(q.uri) if below else q.uri.startswith(target))
                for q in queries
            )

        return uri_test

    # -- sorting ----------------------------------------------------------------------------

    def sort_value(self, rid: str, descending: bool) -> Any:
        """The value `_sort` orders by: the lowest (ascending) or highest (descending), or None."""
        known = self._sort_keys.get((rid, descending), _UNKNOWN)
        if known is not _UNKNOWN:
            return known
        values = self.values.get(rid)
        keys = [self._sortable(v, descending) for v in values or ()]
        found = (max(keys) if descending else min(keys)) if keys else None
        self._sort_keys[(rid, descending)] = found
        return found

    def _sortable(self, value: Any, descending: bool) -> Any:
        if self.kind == "token":
            return value[1]
        if self.kind == "string":
            return normalize_text(value)
        if self.kind == "reference":
            return value.local or value.raw
        if self.kind == "date":
            return value.high if descending else value.low
        if self.kind == "quantity":
            bound = value.high if descending else value.low
            return bound if bound is not None else value.low or value.high or Decimal(0)
        return value


def _implied_system(query: TokenQuery) -> bool:
    """`system|code` where the system is one of FHIR's own code systems (`http://hl7.org/fhir/…`,
    what R4's required bindings on `code` elements use): it also matches a bare `code` primitive."""
    return query.code is not None and (query.system or "").startswith("http://hl7.org/fhir/")


def _discard(table: dict[Any, set[str]], key: Any, rid: str) -> None:
    ids = table.get(key)
    if ids is not None:
        ids.discard(rid)
        if not ids:
            del table[key]
