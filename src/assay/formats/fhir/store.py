"""`FhirStore`: FHIR R4 resources in memory, searched with real R4 semantics (docs/assertions.md).

The snapshot reader, the `fhir-resource-state` check and (later) the live FHIR REST server share
this one engine. Indexes are built lazily, per (resource type, parameter), on the first search
that needs them, and kept consistent by `put` and `delete`.

Results come in recency order (docs/snapshots.md): `meta.lastUpdated` (missing counts as the time the store
received the resource), then `meta.versionId` numerically, then `id` — unless `_sort` asks for
another order, which is applied stably on top, before `_count` caps the list.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from assay.formats.fhir.compartments import DEFINITION
from assay.formats.fhir.dates import DateRange, date_range, micros, now_micros
from assay.formats.fhir.extract import compile_extractor
from assay.formats.fhir.index import ParamIndex
from assay.formats.fhir.modifiers import matcher
from assay.formats.fhir.parameters import SearchParameter, reference_parameters, search_parameter
from assay.formats.fhir.query import parse_search
from assay.formats.fhir.search_terms import Chain, Has, ParsedSearch

__all__ = ["FhirStore"]

SearchParams = Mapping[str, "str | Sequence[str]"]


@dataclass(slots=True)
class _Entry:
    resource: dict[str, Any]
    received_at: int
    """Microseconds since the epoch when the store got it: the lastUpdated stand-in (docs/sandboxes.md)."""
    _recency: tuple[int, int, str] | None = None

    def recency(self, rid: str) -> tuple[int, int, str]:
        """(lastUpdated, versionId, id): derived on the first ranking that needs it, then kept for
        this stored version (a `put` makes a new entry), so re-ranking after a write parses no
        `meta` again and opening a snapshot parses none."""
        if self._recency is None:
            meta = self.resource.get("meta")
            stamp = meta.get("lastUpdated") if isinstance(meta, dict) else None
            found = date_range(stamp) if isinstance(stamp, str) else None
            version = meta.get("versionId") if isinstance(meta, dict) else None
            number = int(version) if isinstance(version, str) and version.isdigit() else 0
            self._recency = (found.low if found else self.received_at, number, rid)
        return self._recency


class FhirStore:
    """Resources by type and id, with lazily built search indexes.

    Returned resources are the stored dicts themselves: callers must not mutate them (use
    `put` with a new dict to change one). One lock serializes searches and writes, so a live
    server's threads can share a store while indexes are built lazily.
    """

    def __init__(self, resources: Iterable[dict[str, Any]] = (), *, loaded_at: datetime | None = None):
        """Load resources (last write wins per type and id); `loaded_at` stands in for missing
        `meta.lastUpdated` values (default: now)."""
        self._received_at = micros(loaded_at) if loaded_at else now_micros()
        self._by_type: dict[str, dict[str, _Entry]] = {}
        self._indexes: dict[tuple[str, str], ParamIndex] = {}
        self._ranks: dict[str, dict[str, int]] = {}
        self._lock = threading.RLock()
        for resource in resources:
            self._store(resource, self._received_at)

    # -- reading ------------------------------------------------------------------------------

    def get(self, resource_type: str, rid: str) -> dict[str, Any] | None:
        entry = self._by_type.get(resource_type, {}).get(rid)
        return entry.resource if entry else None

    def types(self) -> list[str]:
        """Resource types that hold at least one resource, sorted."""
        return sorted(t for t, entries in self._by_type.items() if entries)

    def resources(self, resource_type: str) -> list[dict[str, Any]]:
        """Every resource of the type in recency order, oldest first."""
        with self._lock:
            entries = self._by_type.get(resource_type, {})
            ranks = self._ranks_of(resource_type)
            return [entries[rid].resource for rid in sorted(entries, key=ranks.__getitem__)]

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_type.values())

    # -- writing ------------------------------------------------------------------------------

    def put(self, resource: dict[str, Any], *, received_at: datetime | None = None) -> None:
        """Insert or replace a resource by (resourceType, id), keeping indexes consistent."""
        with self._lock:
            self._store(resource, micros(received_at) if received_at else now_micros())

    def delete(self, resource_type: str, rid: str) -> bool:
        """Remove a resource; False when there was none."""
        with self._lock:
            return self._delete(resource_type, rid)

    def _delete(self, resource_type: str, rid: str) -> bool:
        entries = self._by_type.get(resource_type, {})
        if rid not in entries:
            return False
        del entries[rid]
        for (kind, _), index in self._indexes.items():
            if kind == resource_type:
                index.remove(rid)
        self._ranks.pop(resource_type, None)
        return True

    def _store(self, resource: dict[str, Any], received_at: int) -> None:
        kind, rid = resource.get("resourceType"), resource.get("id")
        if not isinstance(kind, str) or not isinstance(rid, str):
            raise ValueError("a stored FHIR resource needs a string resourceType and id")
        entries = self._by_type.setdefault(kind, {})
        replacing = rid in entries
        entries[rid] = _Entry(resource, received_at)
        for (indexed_type, _), index in self._indexes.items():
            if indexed_type == kind:
                if replacing:
                    index.remove(rid)
                index.add(rid, resource)
        self._ranks.pop(kind, None)

    # -- searching ----------------------------------------------------------------------------

    def has_type(self, resource_type: str) -> bool:
        return bool(self._by_type.get(resource_type))

    def dates(self, resource_type: str, code: str, rid: str) -> tuple[DateRange, ...]:
        """The ranges the date parameter `code` indexes for one resource (none when it has no such
        value): what `$everything`'s care-date filter compares."""
        parameter = search_parameter(resource_type, code)
        if parameter is None or parameter.type != "date":
            raise ValueError(f"{resource_type} has no date parameter {code}")
        with self._lock:
            return tuple(self._index(resource_type, parameter).values.get(rid, ()))

    def outgoing(self, keys: Iterable[tuple[str, str]]) -> list[str]:
        """`Type/id` of every resource that the resources `keys` refer to through a reference
        search parameter (what `$everything` adds), each once, in first-seen order."""
        found: dict[str, None] = {}
        with self._lock:
            by_type: dict[str, list[str]] = {}
            for kind, rid in keys:
                by_type.setdefault(kind, []).append(rid)
            for kind, rids in by_type.items():
                for parameter in reference_parameters(kind):
                    values = self._index(kind, parameter).values
                    for rid in rids:
                        for target in values.get(rid, ()):
                            if target.local:
                                found.setdefault(target.local)
        return list(found)

    def search(
        self,
        resource_type: str,
        params: SearchParams,
        compartment: tuple[str, Sequence[str]] | None = None,
    ) -> list[dict[str, Any]]:
        """Every match of `GET [base]/{resource_type}?{params}`, all pages, in recency or `_sort`
        order, capped by `_count` (docs/assertions.md); within a compartment when given (`("Patient/1",
        ("subject", "performer"))`: resources whose one of those reference parameters points there;
        `compartments.DEFINITION` is the compartment's own resource).

        Raises:
            UnknownSearchParameter: unknown or special parameters, unsupported modifiers.
            InvalidSearch: a bad value.
        """
        parsed = parse_search(resource_type, params)
        with self._lock:
            within = None
            if compartment is not None:
                local, codes = compartment
                within = set()
                for code in codes:
                    if code == DEFINITION:  # the compartment's own resource (`Encounter/e1/Encounter`)
                        kind, _, rid = local.partition("/")
                        if kind == resource_type and rid in self._by_type.get(kind, {}):
                            within.add(rid)
                        continue
                    parameter = search_parameter(resource_type, code)
                    if parameter is not None and parameter.type == "reference":
                        within |= self._index(resource_type, parameter).referring(local)
            return self._execute(parsed, within)

    def _execute(self, search: ParsedSearch, within: set[str] | None = None) -> list[dict[str, Any]]:
        entries = self._by_type.get(search.resource_type, {})
        if within is not None and not within:
            return []
        candidates = self._candidates(search)
        if within is not None:
            candidates = within if candidates is None else candidates & within
        if candidates is not None and not candidates:
            return []
        ranks = self._ranks_of(search.resource_type)
        ids = sorted(candidates if candidates is not None else entries, key=ranks.__getitem__)
        for key in reversed(search.sort):
            index = self._index(search.resource_type, key.parameter)
            ids = _sorted_by(ids, index, key.descending)
        if search.count is not None:
            ids = ids[: search.count]
        return [entries[rid].resource for rid in ids]

    def _candidates(self, search: ParsedSearch) -> set[str] | None:
        """Ids matching every criterion and link; None when the search has neither (all match).

        Indexed criteria run first (lookups before per-value comparisons), then chained and
        `_has` links (each an inner search plus a reference lookup), then the criteria that read
        each remaining candidate (`modifiers.py`)."""
        kind = search.resource_type
        entries = self._by_type.get(kind, {})
        candidates: set[str] | None = None
        indexed = [(c, self._index(kind, c.parameter)) for c in search.criteria if not c.scanned]
        indexed.sort(key=lambda pair: not pair[1].is_lookup(pair[0]))
        for criterion, index in indexed:
            among = candidates if candidates is not None else entries.keys()
            hits = index.matching(criterion, among)
            candidates = hits if candidates is None else candidates & hits
            if not candidates:
                return candidates
        for link in search.links:
            hits = self._linked(kind, link)
            candidates = hits if candidates is None else candidates & hits
            if not candidates:
                return candidates
        if len(indexed) < len(search.criteria):
            for criterion in search.criteria:
                if criterion.scanned:
                    test = matcher(kind, criterion)
                    among = candidates if candidates is not None else entries.keys()
                    candidates = {rid for rid in among if test(entries[rid].resource)}
        return candidates

    def _linked(self, resource_type: str, link: Chain | Has) -> set[str]:
        """Ids of `resource_type` a chained (`subject.name=x`) or reverse-chained
        (`_has:Observation:patient:code=x`) parameter selects."""
        hits: set[str] = set()
        if isinstance(link, Chain):
            index = self._index(resource_type, link.parameter)
            for inner in link.searches:
                found = self._candidates(inner)
                targets = found if found is not None else self._by_type.get(inner.resource_type, {}).keys()
                for rid in targets:
                    hits |= index.referring(f"{inner.resource_type}/{rid}")
            return hits
        source = link.search.resource_type
        parameter = search_parameter(source, link.code)
        assert parameter is not None
        index = self._index(source, parameter)
        found = self._candidates(link.search)
        for rid in found if found is not None else self._by_type.get(source, {}).keys():
            for target in index.values.get(rid, ()):
                if target.type == resource_type and target.id:
                    hits.add(target.id)
        return hits

    def _index(self, resource_type: str, parameter: SearchParameter) -> ParamIndex:
        key = (resource_type, parameter.code)
        index = self._indexes.get(key)
        if index is None:
            index = ParamIndex(
                parameter,
                compile_extractor(resource_type, parameter.expression),
                self._last_updated_fallback(resource_type) if parameter.code == "_lastUpdated" else _nothing,
            )
            for rid, entry in self._by_type.get(resource_type, {}).items():
                index.add(rid, entry.resource)
            self._indexes[key] = index
        return index

    def _last_updated_fallback(self, resource_type: str) -> Any:
        def received(rid: str) -> list[Any]:
            entry = self._by_type.get(resource_type, {}).get(rid)
            return [DateRange(entry.received_at, entry.received_at + 1)] if entry else []

        return received

    def _ranks_of(self, resource_type: str) -> dict[str, int]:
        ranks = self._ranks.get(resource_type)
        if ranks is None:
            entries = self._by_type.get(resource_type, {})
            ordered = sorted(entries, key=lambda rid: entries[rid].recency(rid))
            ranks = self._ranks[resource_type] = {rid: i for i, rid in enumerate(ordered)}
        return ranks


def _nothing(rid: str) -> list[Any]:
    return []


def _sorted_by(ids: list[str], index: ParamIndex, descending: bool) -> list[str]:
    """Stable sort by one `_sort` key; resources without a value go last either way."""
    keyed = [(rid, index.sort_value(rid, descending)) for rid in ids]
    present = [(rid, key) for rid, key in keyed if key is not None]
    absent = [rid for rid, key in keyed if key is None]
    present.sort(key=lambda pair: pair[1], reverse=descending)
    return [rid for rid, _ in present] + absent
