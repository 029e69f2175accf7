"""FHIR dataset loading: a Bundle of any type to the resources it seeds (docs/sandboxes.md).

- `Bundle.type` and every entry `request` are ignored, except DELETE entries, which are skipped.
- Ids are kept; a missing id comes from a `urn:uuid:` fullUrl, else a new UUID.
- References to an entry's `urn:uuid:` or absolute fullUrl are rewritten to `Type/id`.
- A conditional reference (`Practitioner?identifier=sys|val`) is rewritten when exactly one
  loaded resource matches it (this bundle's, or `existing` ones), and left verbatim otherwise;
  parameters that shape a result page (`_count`, `_sort`, …) are not criteria and are ignored.
- A bundle is never rejected for its references; within a bundle the last write of a
  (type, id) wins.

`rewrite_references` and `parse_conditional_reference` are the one reference walker and the one
reading of `Type?params` references: the sandbox's transaction and batch bundles and the external
backend's id namespacing use them too (via `assay.sandboxes.fhir.resources`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from assay.formats.fhir.errors import InvalidSearch
from assay.formats.fhir.store import FhirStore

__all__ = [
    "BundleLoader",
    "ConditionalReference",
    "copy_json",
    "parse_conditional_reference",
    "resources_from_bundle",
    "rewrite_references",
]

Key = tuple[str, str]
_CONDITIONAL = re.compile(r"([A-Z][A-Za-z]+)\?(.*)", re.DOTALL)
"""`[type]?parameters`, relative to the server base (R4 http.html "Conditional References")."""

_RESULT_CONTROLS = frozenset(
    {"_count", "_sort", "_offset", "_getpagesoffset", "_include", "_revinclude", "_summary",
     "_elements", "_total", "_contained", "_containedType", "_format", "_pretty"}
)  # fmt: skip
"""Parameters that shape a result page, not which resources match (R4 http.html "Conditional
References": "none of the parameters that control the return of resources are relevant")."""


@dataclass(frozen=True, slots=True)
class ConditionalReference:
    """A reference written as a search (`Practitioner?identifier=sys|1`) instead of `Type/id`."""

    resource_type: str
    """The type named before `?`; only its shape is checked here, not that R4 defines it."""
    query: str
    """Everything after the first `?`, as written (may be empty)."""
    pairs: tuple[tuple[str, str], ...]
    """The query's (name, value) pairs in order, blank values kept."""

    @property
    def criteria(self) -> list[tuple[str, str]]:
        """`pairs` without the parameters that shape a result page (`_count`, `_sort`, …): R4
        allows only filtering parameters here, and `_count=1` must not hide a second match."""
        return [(name, value) for name, value in self.pairs if name.partition(":")[0] not in _RESULT_CONTROLS]


def parse_conditional_reference(text: str) -> ConditionalReference | None:
    """`Type?query` as a `ConditionalReference`; None for any other reference (`Type/id`, URLs,
    `urn:`, `#contained`, `Patient/1?x`)."""
    found = _CONDITIONAL.fullmatch(text)
    if found is None:
        return None
    return ConditionalReference(found[1], found[2], tuple(parse_qsl(found[2], keep_blank_values=True)))


def rewrite_references(value: Any, mapping: Callable[[str], str | None]) -> Any:
    """`value` with every `reference` string that `mapping` maps replaced, in place; returns `value`.

    Walks dicts and lists depth first, a node's own `reference` before its children, so a mapping
    with side effects (dataset loading resolves conditional references against the resources it
    is rewriting) sees references in document order. `mapping` returns None to leave one alone.

    Every node of every dataset resource passes through here when a layer is built (a
    quarter of a 1,024-patient `start`), so the walk tests each child's exact class first (decoded
    JSON holds only `dict`, `list`, `str` and numbers) and falls back to `isinstance` for
    anything else: the same nodes visited in the same order in 55% of the CPU time (400 Synthea
    patient bundles: 1.31 s -> 0.72 s) of one function testing `isinstance(item, dict | list)`.
    """
    if isinstance(value, list):
        _rewrite_items(value, mapping)
    elif isinstance(value, dict):
        _rewrite_dict(value, mapping)
    return value


def _rewrite_dict(value: dict[str, Any], mapping: Callable[[str], str | None]) -> None:
    reference = value.get("reference")
    if reference is not None and isinstance(reference, str):
        new = mapping(reference)
        if new is not None:
            value["reference"] = new
    _rewrite_items(value.values(), mapping)


def _rewrite_items(items: Iterable[Any], mapping: Callable[[str], str | None]) -> None:
    """Each of a list's items or a dict's values, in order."""
    for item in items:
        kind = item.__class__
        if kind is str:
            continue
        if kind is dict:
            _rewrite_dict(item, mapping)
        elif kind is list:
            _rewrite_items(item, mapping)
        elif isinstance(item, dict):
            _rewrite_dict(item, mapping)
        elif isinstance(item, list):
            _rewrite_items(item, mapping)


def resources_from_bundle(
    bundle: dict[str, Any], existing: Iterable[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The resources a dataset Bundle loads, references rewritten (docs/sandboxes.md).

    Args:
        bundle: a FHIR Bundle (any `type`); the input is not modified.
        existing: resources already loaded (earlier datasets) that conditional references may
            resolve to.
    """
    loader = BundleLoader(existing)
    return loader.add(bundle)


class BundleLoader:
    """Dataset Bundles loaded one after another into one set of resources (docs/sandboxes.md).

    Linear in the data: the conditional references of every bundle resolve against one
    `FhirStore`, built the first time a bundle has one and then kept current with `put`, instead
    of a store built per bundle over everything loaded so far (1,024 replicated patients: 256
    builds, 113 s). A conditional reference sees the earlier bundles and its own, last write
    winning, exactly as before.

    Args:
        existing: resources already loaded (earlier datasets), kept as they are.
        copy: False when the caller owns the bundles (freshly decoded JSON): their resources are
            then loaded and rewritten in place instead of copied first.
        prepare: called on each loaded resource before it is indexed (the sandbox stamps `meta`).
    """

    def __init__(
        self,
        existing: Iterable[dict[str, Any]] = (),
        *,
        copy: bool = True,
        prepare: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.by_key: dict[Key, dict[str, Any]] = {}
        """Every loaded resource in load order, the last write of a (type, id) last."""
        self.copy = copy
        self.prepare = prepare
        self.index_builds = 0
        """How many times a `FhirStore` was built over the loaded resources (at most one)."""
        self._store: FhirStore | None = None
        for resource in existing:
            self._keep(resource)

    @property
    def store(self) -> FhirStore | None:
        """The search index conditional references used, current with `by_key` (None when no
        bundle had one): a caller can search the loaded resources without building another."""
        return self._store

    def resources(self) -> list[dict[str, Any]]:
        return list(self.by_key.values())

    def add(self, bundle: dict[str, Any]) -> list[dict[str, Any]]:
        """Load one Bundle (any `type`); the resources it loaded, references rewritten."""
        loaded: dict[Key, dict[str, Any]] = {}
        aliases: dict[str, str] = {}
        for entry in bundle.get("entry") or []:
            if not isinstance(entry, dict):
                continue
            request = entry.get("request")
            if isinstance(request, dict) and str(request.get("method", "")).upper() == "DELETE":
                continue
            resource = entry.get("resource")
            if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
                continue
            if self.copy:
                resource = copy_json(resource)
            given_url = entry.get("fullUrl")
            full_url = given_url if isinstance(given_url, str) else ""
            if not isinstance(resource.get("id"), str) or not resource["id"]:
                resource["id"] = (
                    full_url[len("urn:uuid:") :] if full_url.startswith("urn:uuid:") else str(uuid.uuid4())
                )
            local = f"{resource['resourceType']}/{resource['id']}"
            if full_url.startswith(("urn:uuid:", "urn:oid:", "http://", "https://")):
                aliases[full_url] = local
            key = (resource["resourceType"], resource["id"])
            loaded.pop(key, None)
            loaded[key] = resource
        resources = list(loaded.values())
        names = _LocalNames(aliases)
        pending: list[dict[str, Any]] = []
        for resource in resources:
            met = names.met
            rewrite_references(resource, names)
            if names.met > met:
                pending.append(resource)
        for resource in resources:
            if self.prepare is not None:
                self.prepare(resource)
            self._keep(resource)
        if pending:
            store = self._index()
            rewrite_references(pending, _ConditionalResolver(store, names.conditional))
            for resource in pending:  # their references changed since they were indexed
                store.put(resource)
        return resources

    def _keep(self, resource: dict[str, Any]) -> None:
        key = (resource["resourceType"], resource["id"])
        self.by_key.pop(key, None)
        self.by_key[key] = resource
        if self._store is not None:
            self._store.put(resource)

    def _index(self) -> FhirStore:
        if self._store is None:
            self._store = FhirStore(self.by_key.values())
            self.index_builds += 1
        return self._store


def copy_json(value: Any) -> Any:
    """A copy of a JSON tree (dicts, lists, scalars): several times faster than `copy.deepcopy`,
    which keeps a memo for shared and cyclic objects that decoded JSON never has."""
    if isinstance(value, dict):
        return {
            key: copy_json(item) if isinstance(item, dict | list) else item for key, item in value.items()
        }
    if isinstance(value, list):
        return [copy_json(item) if isinstance(item, dict | list) else item for item in value]
    return value


class _LocalNames:
    """The first pass's mapping: fullUrl aliases become `Type/id`; conditional references are
    noted (`met` counts them, so the caller knows which resources the second pass must walk)."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.conditional: set[str] = set()
        self.met = 0

    def __call__(self, reference: str) -> str | None:
        if reference in self.aliases:
            return self.aliases[reference]
        if "?" in reference:
            self.conditional.add(reference)
            self.met += 1
        return None


class _ConditionalResolver:
    """The second pass's mapping: each conditional reference text the first pass met, resolved once
    against the loaded resources (`Type/id` when exactly one matches, else left alone)."""

    def __init__(self, store: FhirStore, conditional: set[str]):
        self.store = store
        self.conditional = conditional
        self.answers: dict[str, str | None] = {}

    def __call__(self, reference: str) -> str | None:
        if reference not in self.conditional:
            return None
        if reference not in self.answers:
            self.answers[reference] = _match_one(self.store, reference)
        return self.answers[reference]


def _match_one(store: FhirStore, reference: str) -> str | None:
    conditional = parse_conditional_reference(reference)
    criteria = [] if conditional is None else conditional.criteria
    if conditional is None or not criteria:
        return None
    params: dict[str, list[str]] = {}
    for key, value in criteria:
        params.setdefault(key, []).append(value)
    try:
        found = store.search(conditional.resource_type, params)
    except InvalidSearch:
        return None
    return f"{conditional.resource_type}/{found[0]['id']}" if len(found) == 1 else None
