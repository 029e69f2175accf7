"""FHIR search (R4 search.html) over the sandbox's index: parameters, paging, `_include` and
`_revinclude`, and the searchset Bundle. The semantics are the verification core's
(`assay.formats.fhir`), so a check and an agent's GET see the same candidates."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any
from urllib.parse import urlencode

from assay.formats.fhir import InvalidSearch, UnknownSearchParameter
from assay.formats.fhir._search_parameters import SEARCH_PARAMETERS
from assay.formats.fhir.extract import compile_extractor
from assay.formats.fhir.parameters import is_resource_type, search_parameter
from assay.formats.fhir.query import check_search_keys
from assay.formats.fhir.references import parse_reference
from assay.sandboxes.fhir.answers import SearchAnswers
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.rendering import render_json
from assay.sandboxes.fhir.resources import check_type
from assay.sandboxes.fhir.results import (
    FhirResult,
)
from assay.sandboxes.fhir.store import EmbeddedFhir
from assay.sandboxes.fhir.subsetting import Subset, parse_subset

__all__ = [
    "DEFAULT_COUNT",
    "IGNORED_PARAMETERS",
    "MAX_COUNT",
    "entries_bundle",
    "nonnegative",
    "page_links",
    "parse_include",
    "run_search",
    "search",
]


DEFAULT_COUNT = 50


MAX_COUNT = 1000


IGNORED_PARAMETERS = frozenset(
    {"_format", "_pretty", "_summary", "_elements", "_total", "_contained", "_containedType"}
)
"""Control parameters that select nothing (`_summary`/`_elements` shape entries: `subsetting.py`)."""


@dataclass(frozen=True, slots=True)
class _Include:
    """One `_include` / `_revinclude` value: `Source:param[:Target]`, `Source:*` or `*`."""

    reverse: bool
    source: str | None
    """None for `*` (every reference of any resource)."""
    code: str | None
    """None for `*` (every reference search parameter of the source type)."""
    target: str | None
    iterate: bool
    """`:iterate` (R3's `:recurse`): also applied to the resources included so far, repeatedly."""


@dataclass
class _SearchRequest:
    params: dict[str, list[str]]
    count: int = DEFAULT_COUNT
    offset: int = 0
    includes: list[_Include] = field(default_factory=list)


def nonnegative(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise FhirError(400, f"{name} must be a non-negative integer, got {value!r}") from None
    if number < 0:
        raise FhirError(400, f"{name} must be a non-negative integer, got {value!r}")
    return number


def _search_request(pairs: Sequence[tuple[str, str]]) -> _SearchRequest:
    request = _SearchRequest(defaultdict(list))
    for name, value in pairs:
        code, _, modifier = name.partition(":")
        if name == "_count":
            request.count = min(nonnegative(name, value), MAX_COUNT)
        elif name in ("_offset", "_getpagesoffset"):
            request.offset = nonnegative(name, value)
        elif code in ("_include", "_revinclude"):
            if modifier not in ("", "iterate", "recurse"):
                raise FhirError(400, f"{name}: the only modifier of {code} is :iterate")
            request.includes.append(parse_include(value, code, bool(modifier)))
        elif name == "_summary" and value == "count":
            request.count = 0
        elif name not in IGNORED_PARAMETERS:
            request.params[name].append(value)
    return request


def _engine_params(params: dict[str, list[str]]) -> dict[str, str | list[str]]:
    return {name: values[0] if len(values) == 1 else list(values) for name, values in params.items()}


def run_search(index_search: Any, resource_type: str, params: dict[str, list[str]]) -> list[dict[str, Any]]:
    try:
        return list(index_search(resource_type, _engine_params(params)))
    except InvalidSearch as exc:
        raise FhirError(400, str(exc)) from None
    except ValueError as exc:
        raise FhirError(400, f"search {resource_type}: {exc}") from None


def parse_include(spec: str, kind: str, iterate: bool) -> _Include:
    """Parse one include value; 400 when it names no reference parameter."""
    reverse = kind == "_revinclude"
    if spec == "*" and not reverse:
        return _Include(False, None, None, None, iterate)
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise FhirError(400, f"{kind}={spec!r}: expected SourceType:parameter[:TargetType] or *")
    source, code, target = parts[0], parts[1], parts[2] if len(parts) == 3 else None
    if code == "*" and not reverse:
        if not is_resource_type(source):
            raise FhirError(400, f"{kind}={spec!r}: unknown resource type {source!r}")
        return _Include(False, source, None, target, iterate)
    parameter = search_parameter(source, code)
    if parameter is None or parameter.type != "reference":
        raise FhirError(400, f"{kind}={spec!r}: {source} has no reference parameter {code}")
    return _Include(reverse, source, code, target, iterate)


@cache
def _reference_codes(resource_type: str) -> tuple[str, ...]:
    """Every reference search parameter of `resource_type` (what `Type:*` follows)."""
    codes = []
    for code in sorted({**SEARCH_PARAMETERS.get("Resource", {}), **SEARCH_PARAMETERS.get(resource_type, {})}):
        parameter = search_parameter(resource_type, code)
        if parameter is not None and parameter.type == "reference" and parameter.expression:
            codes.append(code)
    return tuple(codes)


def _referenced(resource: dict[str, Any], source: str, code: str) -> list[str]:
    parameter = search_parameter(source, code)
    assert parameter is not None
    extractor = compile_extractor(source, parameter.expression)
    found = []
    for typed in extractor(resource):
        value = typed.value
        if isinstance(value, dict) and isinstance(value.get("reference"), str):
            local = parse_reference(value["reference"]).local
            if local:
                found.append(local)
    return found


def _included(
    index: Any, resource_type: str, page: list[dict[str, Any]], request: _SearchRequest
) -> list[dict[str, Any]]:
    """`_include`d and `_revinclude`d resources of one page, each once, never a match again.

    Plain includes apply to the page's matches (an `_include` whose source is not the searched
    type selects nothing); `:iterate` ones also to every resource included so far, round after
    round until a round adds nothing (the store is finite and nothing is added twice).
    """
    seen = {(r["resourceType"], r["id"]) for r in page}
    out: list[dict[str, Any]] = []

    def add(resource: dict[str, Any] | None, into: list[dict[str, Any]]) -> None:
        if resource is not None and (resource["resourceType"], resource["id"]) not in seen:
            seen.add((resource["resourceType"], resource["id"]))
            into.append(resource)

    frontier, first = page, True
    while frontier:
        added: list[dict[str, Any]] = []
        for spec in request.includes:
            if not (first or spec.iterate):
                continue
            if first and not spec.iterate and not spec.reverse and spec.source not in (None, resource_type):
                continue
            follow = _add_reverse if spec.reverse else _add_forward
            follow(index, spec, frontier, partial(add, into=added))
        out += added
        frontier, first = added, False
        if not any(spec.iterate for spec in request.includes):
            break
    return out


def _add_forward(
    index: Any, spec: _Include, frontier: list[dict[str, Any]], add: Callable[[dict[str, Any] | None], None]
) -> None:
    for resource in frontier:
        kind = resource["resourceType"]
        if spec.source is not None and kind != spec.source:
            continue
        for code in (spec.code,) if spec.code else _reference_codes(kind):
            for local in _referenced(resource, kind, code):
                target, rid = local.split("/", 1)
                if spec.target is None or target == spec.target:
                    current = index.current((target, rid))
                    add(current.resource if current else None)


def _add_reverse(
    index: Any, spec: _Include, frontier: list[dict[str, Any]], add: Callable[[dict[str, Any] | None], None]
) -> None:
    assert spec.source is not None and spec.code is not None
    targets = [r for r in frontier if spec.target is None or r["resourceType"] == spec.target]
    if targets:
        refs = ",".join(f"{r['resourceType']}/{r['id']}" for r in targets)
        for resource in run_search(index.search_index.search, spec.source, {spec.code: [refs]}):
            add(resource)


def _known(resource_type: str, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """`pairs` without the search parameters this engine does not know or support
    (`Prefer: handling=lenient`, R4 search.html "Handling errors")."""
    kept = []
    for name, value in pairs:
        if name.partition(":")[0] in _CONTROL or name == "_sort":
            kept.append((name, value))
            continue
        try:
            check_search_keys(resource_type, {name: value})
        except UnknownSearchParameter:
            continue
        kept.append((name, value))
    return kept


_CONTROL = IGNORED_PARAMETERS | {"_count", "_offset", "_getpagesoffset", "_include", "_revinclude"}


def entries_bundle(
    path: str,
    pairs: Sequence[tuple[str, str]],
    base: str,
    page: list[dict[str, Any]],
    total: int,
    count: int,
    offset: int,
    included: Sequence[dict[str, Any]] = (),
    subset: Subset | None = None,
) -> dict[str, Any]:
    """A `searchset` Bundle of one page (`match` entries, then `include` ones) with paging links."""
    shape = subset.apply if subset is not None else (lambda r: r)
    entries = [
        {"fullUrl": f"{base}/{r['resourceType']}/{r['id']}", "resource": shape(r), "search": {"mode": mode}}
        for rows, mode in ((page, "match"), (included, "include"))
        for r in rows
    ]
    links = page_links(path, pairs, count, offset, total)
    return {"resourceType": "Bundle", "type": "searchset", "total": total, "link": links, "entry": entries}


def search(
    fhir: EmbeddedFhir,
    store_id: str,
    base: str,
    resource_type: str,
    pairs: Sequence[tuple[str, str]],
    *,
    compartment: tuple[str, Sequence[str]] | None = None,
    path: str | None = None,
    lenient: bool = False,
    answers: SearchAnswers | None = None,
) -> FhirResult:
    """Search with paging (`_count`, default 50, max 1000; `next` links), includes, `_summary` and
    `_elements`; within a compartment (`Patient/1`, its parameters) when one is given. `lenient`
    drops parameters it does not know instead of answering 400.

    With `answers` (the HTTP routes), an answer already rendered for this store's state and this
    request comes from there as bytes (`FhirResult.content`, no `body`), and a new one is kept."""
    check_type(resource_type)
    key: tuple[Any, ...] | None = None
    if answers is not None:
        within = None if compartment is None else (compartment[0], tuple(compartment[1]))
        key = (resource_type, tuple(pairs), base, within, path, lenient)
    if lenient:
        pairs = _known(resource_type, pairs)
    with fhir.reading(store_id) as index:
        if answers is not None:
            key = (index.generation, index.seq, key)
            content = answers.get(key)
            if content is not None:
                return FhirResult(200, content=content)
        subset = parse_subset(pairs)
        request = _search_request(pairs)
        store = index.search_index
        try:
            matches = store.search(resource_type, _engine_params(request.params), compartment=compartment)
        except InvalidSearch as exc:
            raise FhirError(400, str(exc)) from None
        except ValueError as exc:
            raise FhirError(400, f"search {resource_type}: {exc}") from None
        page = matches[request.offset : request.offset + request.count]
        included = _included(index, resource_type, page, request)
    bundle = entries_bundle(
        path or f"{base}/{resource_type}", pairs, base, page, len(matches), request.count, request.offset,
        included, subset,
    )  # fmt: skip
    if answers is None:
        return FhirResult(200, bundle)
    # The lists were taken at `index.seq`: the answer is that state's, whatever was written since.
    content, strict = render_json(bundle)
    if strict:
        answers.put(key, content)
    return FhirResult(200, bundle, content=content if strict else None)


def page_links(
    path: str, pairs: Sequence[tuple[str, str]], count: int, offset: int, total: int
) -> list[dict[str, str]]:
    """`self`, and `next` / `previous` where there is such a page, of a searchset or history
    Bundle: the request's own parameters with `_count` and `_offset` set for that page."""
    kept = [(k, v) for k, v in pairs if k not in ("_count", "_offset", "_getpagesoffset")]

    def link(relation: str, at: int) -> dict[str, str]:
        query = urlencode([*kept, ("_count", str(count)), ("_offset", str(at))])
        return {"relation": relation, "url": f"{path}?{query}"}

    links = [link("self", offset)]
    if count and offset + count < total:
        links.append(link("next", offset + count))
    if offset > 0 and count:
        links.append(link("previous", max(0, offset - count)))
    return links
