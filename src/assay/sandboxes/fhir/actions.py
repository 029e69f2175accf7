"""The FHIR R4 interactions of the sandbox surface (SPEC §5.2), over an `EmbeddedFhir` store.

Each action takes parsed request parts and returns a `FhirResult`; failures raise `FhirError`
(turned into OperationOutcome once, in the router). Search semantics are the verification core's
(`assay.formats.fhir`): a check and an agent's GET see the same candidates.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from functools import cache, partial
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

from assay.formats.fhir import InvalidSearch, UnknownSearchParameter
from assay.formats.fhir._search_parameters import SEARCH_PARAMETERS
from assay.formats.fhir.extract import compile_extractor
from assay.formats.fhir.parameters import is_resource_type, search_parameter
from assay.formats.fhir.query import check_search_keys
from assay.formats.fhir.references import parse_reference
from assay.sandboxes.fhir.answers import SearchAnswers
from assay.sandboxes.fhir.fhirpath_patch import apply_fhirpath_patch, is_fhirpath_patch
from assay.sandboxes.fhir.index import Current, VersionRow
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.rendering import render_json
from assay.sandboxes.fhir.resources import check_resource, check_type, parse_etag
from assay.sandboxes.fhir.store import EmbeddedFhir, WriteTransaction
from assay.sandboxes.fhir.subsetting import Subset, parse_subset
from assay.sandboxes.fhir.validation import repeats
from assay.sandboxes.json_depth import MAX_JSON_DEPTH, nested_deeper_than
from assay.store import iso

__all__ = [
    "DEFAULT_COUNT",
    "MAX_COUNT",
    "FhirResult",
    "Searchable",
    "apply_json_patch",
    "apply_patch",
    "conditional_delete",
    "conditional_matches",
    "conditional_patch",
    "conditional_update",
    "create",
    "delete",
    "entries_bundle",
    "history",
    "http_date",
    "nonnegative",
    "parse_include",
    "patch",
    "read",
    "run_search",
    "search",
    "store_history",
    "to_instant",
    "update",
    "vread",
    "written",
]

DEFAULT_COUNT = 50
MAX_COUNT = 1000
_IGNORED = frozenset(
    {"_format", "_pretty", "_summary", "_elements", "_total", "_contained", "_containedType"}
)
"""Control parameters that select nothing (`_summary`/`_elements` shape entries: `subsetting.py`)."""


@dataclass
class FhirResult:
    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    """The body already rendered (`rendering.render_json`): a search answer from `SearchAnswers`
    comes as bytes only (`body` None)."""


def _existing(tx: WriteTransaction, resource_type: str, resource_id: str) -> Current:
    """The current version (possibly a delete) of a resource the URL names; 404 when never seen."""
    current = tx.current(resource_type, resource_id)
    if current is None:
        raise FhirError(404, f"{resource_type}/{resource_id} is not known")
    return current


def http_date(instant: Any) -> str | None:
    """A FHIR instant as an RFC 9110 HTTP-date (`Tue, 01 Dec 2026 09:00:00 GMT`), which is what
    `Last-Modified` holds (R4 http.html); None when it is not a readable instant."""
    if not isinstance(instant, str):
        return None
    try:
        moment = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    except ValueError:
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return format_datetime(moment.astimezone(UTC), usegmt=True)


def version_headers(resource: dict[str, Any]) -> dict[str, str]:
    meta = resource.get("meta") or {}
    headers = {"ETag": f'W/"{meta.get("versionId", "1")}"'}
    modified = http_date(meta.get("lastUpdated"))
    if modified:
        headers["Last-Modified"] = modified
    return headers


def _location(base: str, resource: dict[str, Any]) -> str:
    return f"{base}/{resource['resourceType']}/{resource['id']}/_history/{resource['meta']['versionId']}"


def written(base: str, stored: dict[str, Any], before: Current | None) -> FhirResult:
    """The answer to an update of `stored`: 201 with a Location when it (re)created the resource
    (`before` is None or a delete), else 200; version headers either way."""
    created = before is None or before.deleted
    headers = version_headers(stored)
    if created:
        headers["Location"] = _location(base, stored)
    return FhirResult(201 if created else 200, stored, headers)


# -- read ----------------------------------------------------------------------------------------


def read(
    fhir: EmbeddedFhir, store_id: str, resource_type: str, resource_id: str, subset: Subset | None = None
) -> FhirResult:
    """`GET [type]/[id]`; `_summary`/`_elements` (`subset`) cut the answer as they cut a search's."""
    check_type(resource_type)
    with fhir.reading(store_id) as index:
        current = index.current((resource_type, resource_id))
    if current is None:
        raise FhirError(404, f"{resource_type}/{resource_id} is not known")
    if current.deleted or current.resource is None:
        raise FhirError(410, f"{resource_type}/{resource_id} was deleted (version {current.version_id})")
    body = subset.apply(current.resource) if subset is not None else current.resource
    return FhirResult(200, body, version_headers(current.resource))


def vread(
    fhir: EmbeddedFhir, store_id: str, resource_type: str, resource_id: str, version: str
) -> FhirResult:
    check_type(resource_type)
    for row in fhir.history(store_id, resource_type, resource_id):
        if row.version_id == version:
            resource = row.resource()
            if resource is None:
                raise FhirError(410, f"{resource_type}/{resource_id} version {version} is a delete")
            return FhirResult(200, resource, version_headers(resource))
    raise FhirError(404, f"{resource_type}/{resource_id} has no version {version}")


def _history_entry(base: str, row: VersionRow, first: bool) -> dict[str, Any]:
    """One `history` Bundle entry: the version, and the interaction that wrote it."""
    method = "DELETE" if row.deleted else ("POST" if first else "PUT")
    entry: dict[str, Any] = {
        "fullUrl": f"{base}/{row.resource_type}/{row.resource_id}",
        "request": {"method": method, "url": f"{row.resource_type}/{row.resource_id}"},
        "response": {
            "status": "204" if row.deleted else ("201" if first else "200"),
            "etag": f'W/"{row.version_id}"',
            "lastModified": row.last_updated,
        },
    }
    resource = row.resource()
    if resource is not None:
        entry["resource"] = resource
    return entry


def history(
    fhir: EmbeddedFhir,
    store_id: str,
    base: str,
    resource_type: str,
    resource_id: str,
    pairs: Sequence[tuple[str, str]] = (),
) -> FhirResult:
    """Instance history (`GET [type]/[id]/_history`), newest first, the seeded version included.

    Paged and filtered like type and system history (`_count`, `_offset`, `_since`, `next`); the
    oldest version is the one written by create (`POST`, 201).
    """
    check_type(resource_type)
    request = _history_request(pairs)
    rows = fhir.history(store_id, resource_type, resource_id)
    if not rows:
        raise FhirError(404, f"{resource_type}/{resource_id} is not known")
    versions = [(row, i == 0) for i, row in enumerate(rows)][::-1]
    if request.since is not None:
        versions = [(row, first) for row, first in versions if _written_since(row, request.since)]
    page = versions[request.offset : request.offset + request.count]
    entries = [_history_entry(base, row, first) for row, first in page]
    path = f"{base}/{resource_type}/{resource_id}/_history"
    return _history_bundle(path, pairs, request, len(versions), entries)


def to_instant(name: str, value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise FhirError(400, f"{name} must be a FHIR instant, got {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _written_since(row: VersionRow, since: datetime) -> bool:
    """Whether a version's `lastUpdated` is at or after `since`; a seeded version without a
    readable one was not written since anything."""
    try:
        return to_instant("lastUpdated", row.last_updated) >= since
    except FhirError:
        return False


@dataclass(frozen=True, slots=True)
class _HistoryRequest:
    """The parameters every history interaction takes (instance, type and system)."""

    count: int = DEFAULT_COUNT
    offset: int = 0
    since: datetime | None = None


def _history_request(pairs: Sequence[tuple[str, str]]) -> _HistoryRequest:
    """`_count` (default 50, max 1000), `_offset` and `_since`; 400 for any other parameter."""
    count, offset, since = DEFAULT_COUNT, 0, None
    for name, value in pairs:
        if name == "_count":
            count = min(nonnegative(name, value), MAX_COUNT)
        elif name in ("_offset", "_getpagesoffset"):
            offset = nonnegative(name, value)
        elif name == "_since":
            since = to_instant(name, value)
        elif name not in _IGNORED:
            raise FhirError(400, f"_history takes _count, _offset and _since, not {name!r}")
    return _HistoryRequest(count, offset, since)


def _history_bundle(
    path: str,
    pairs: Sequence[tuple[str, str]],
    request: _HistoryRequest,
    total: int,
    entries: list[dict[str, Any]],
) -> FhirResult:
    links = _page_links(path, pairs, request.count, request.offset, total)
    bundle = {"resourceType": "Bundle", "type": "history", "total": total, "link": links, "entry": entries}
    return FhirResult(200, bundle)


def _page_links(
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


def store_history(
    fhir: EmbeddedFhir, store_id: str, base: str, resource_type: str | None, pairs: Sequence[tuple[str, str]]
) -> FhirResult:
    """Type-level (`GET [type]/_history`) or system-level (`GET _history`) history, newest first.

    It lists the versions this playground wrote (its own `fhir_versions` rows), not the seeded
    dataset's: those are version 1 of every loaded resource and instance history shows them.
    Paged like a search (`_count`, `_offset`, `next`); `_since` keeps versions written at or after
    that instant.
    """
    if resource_type is not None:
        check_type(resource_type)
    request = _history_request(pairs)
    after = iso(request.since)  # the stored lastUpdated format, so the store compares text
    total, rows = fhir.store_history(store_id, resource_type, after, request.offset, request.count)
    entries = [_history_entry(base, row, row.version_id == "1") for row in rows]
    path = f"{base}/{resource_type}/_history" if resource_type else f"{base}/_history"
    return _history_bundle(path, pairs, request, total, entries)


# -- search --------------------------------------------------------------------------------------


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
        elif name not in _IGNORED:
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


_CONTROL = _IGNORED | {"_count", "_offset", "_getpagesoffset", "_include", "_revinclude"}


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
    links = _page_links(path, pairs, count, offset, total)
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


# -- writes --------------------------------------------------------------------------------------


class Searchable(Protocol):
    """What conditional criteria are matched against: a `WriteTransaction` (the state before it)
    or a `FhirStore` (a transaction's own writes, `bundles.py`)."""

    def search(self, resource_type: str, params: Mapping[str, Any]) -> list[dict[str, Any]]: ...


def conditional_matches(
    tx: Searchable,
    resource_type: str,
    query: str | Sequence[tuple[str, str]],
    what: str = "If-None-Exist",
) -> list[dict[str, Any]]:
    """Resources matching a conditional query (`identifier=a|b`, optionally `Type?…`, or pairs).

    The criteria of conditional create, update and delete and of conditional references; control
    parameters such as `_format` are dropped, and criteria that select nothing at all are refused
    (400): a conditional write must name what it means.
    """
    if isinstance(query, str):
        text = query.strip()
        pairs = parse_qsl(text.split("?", 1)[1] if "?" in text else text, keep_blank_values=True)
    else:
        pairs = list(query)
    params: dict[str, list[str]] = defaultdict(list)
    for name, value in pairs:
        if name not in _IGNORED:
            params[name].append(value)
    if not params:
        raise FhirError(400, f"{what} {urlencode(pairs)!r} holds no search parameters")
    return run_search(tx.search, resource_type, params)


def _check_if_match(if_match: str | None, current: Any, label: str, status: int = 412) -> None:
    if if_match is None:
        return
    wanted = parse_etag(if_match)
    if current is None or current.deleted or current.version_id != wanted:
        have = "none" if current is None or current.deleted else current.version_id
        raise FhirError(status, f"{label}: If-Match wants version {wanted}, current is {have}")


def _criteria_in_url(pairs: Sequence[tuple[str, str]], if_none_exist: str | None) -> str | None:
    """The conditional-create criteria: `If-None-Exist`, or a query string on the POST (HAPI and
    R5 read `POST [type]?criteria` as the same request); 400 when both are given and differ."""
    criteria = [(k, v) for k, v in pairs if k not in _IGNORED]
    if not criteria:
        return if_none_exist
    query = urlencode(criteria)
    if if_none_exist and sorted(parse_qsl(if_none_exist.split("?", 1)[-1])) != sorted(criteria):
        raise FhirError(
            400, f"conditional create: If-None-Exist {if_none_exist!r} and the URL's {query!r} differ"
        )
    return query


def create(
    fhir: EmbeddedFhir,
    store_id: str,
    base: str,
    resource_type: str,
    body: Any,
    if_none_exist: str | None = None,
    pairs: Sequence[tuple[str, str]] = (),
) -> FhirResult:
    """`POST [type]`; conditional (`If-None-Exist`, or criteria in the URL): one match answers 200
    with it and writes nothing, several are 412."""
    check_type(resource_type)
    if_none_exist = _criteria_in_url(pairs, if_none_exist)
    resource = check_resource(body, resource_type)
    with fhir.writing(store_id) as tx:
        if if_none_exist:
            found = conditional_matches(tx, resource_type, if_none_exist)
            if len(found) > 1:
                raise FhirError(412, f"If-None-Exist {if_none_exist!r} matches {len(found)} resources")
            if found:
                return FhirResult(200, found[0], version_headers(found[0]))
        stored = tx.put(resource, str(uuid.uuid4()))
    return FhirResult(201, stored, {**version_headers(stored), "Location": _location(base, stored)})


def update(
    fhir: EmbeddedFhir,
    store_id: str,
    base: str,
    resource_type: str,
    resource_id: str,
    body: Any,
    if_match: str | None = None,
) -> FhirResult:
    check_type(resource_type)
    resource = check_resource(body, resource_type, resource_id)
    with fhir.writing(store_id) as tx:
        current = tx.current(resource_type, resource_id)
        _check_if_match(if_match, current, f"{resource_type}/{resource_id}")
        stored = tx.put(resource, resource_id)
    return written(base, stored, current)


def conditional_update(
    fhir: EmbeddedFhir,
    store_id: str,
    base: str,
    resource_type: str,
    pairs: Sequence[tuple[str, str]],
    body: Any,
    if_match: str | None = None,
) -> FhirResult:
    """`PUT [type]?criteria` (FHIR R4 §3.1.0.4.3): no match creates, one match is updated, more 412.

    With no match the body's `id`, when it has one, is kept (update-as-create), else the server
    assigns one; with one match a body `id` other than the match's is 400.
    """
    check_type(resource_type)
    resource = check_resource(body, resource_type)
    with fhir.writing(store_id) as tx:
        found = conditional_matches(tx, resource_type, pairs, "conditional update")
        if len(found) > 1:
            raise FhirError(412, f"conditional update matches {len(found)} {resource_type} resources")
        body_id = resource.get("id")
        if found and body_id is not None and body_id != found[0]["id"]:
            raise FhirError(
                400,
                f"conditional update matches {resource_type}/{found[0]['id']}, but the body has id {body_id!r}",
            )
        rid = found[0]["id"] if found else (body_id or str(uuid.uuid4()))
        current = tx.current(resource_type, rid)
        _check_if_match(if_match, current, f"{resource_type}/{rid}")
        stored = tx.put(resource, rid)
    return written(base, stored, current)


def conditional_delete(
    fhir: EmbeddedFhir, store_id: str, resource_type: str, pairs: Sequence[tuple[str, str]]
) -> FhirResult:
    """`DELETE [type]?criteria`: one match is deleted, no match is a 204 no-op, more is 412.

    FHIR R4 lets a server delete every match instead; this one deletes single resources only
    (CapabilityStatement `conditionalDelete: single`).
    """
    check_type(resource_type)
    with fhir.writing(store_id) as tx:
        found = conditional_matches(tx, resource_type, pairs, "conditional delete")
        if len(found) > 1:
            raise FhirError(412, f"conditional delete matches {len(found)} {resource_type} resources")
        if not found:
            return FhirResult(204)
        version = tx.delete(resource_type, found[0]["id"])
    return FhirResult(204, None, {"ETag": f'W/"{version}"'})


def apply_json_patch(operations: Any, resource: dict[str, Any], label: str = "") -> dict[str, Any]:
    """`resource` with RFC 6902 `operations` applied (a copy): 400 when they are not a JSON Patch,
    422 when one cannot be applied. Shared by PATCH and transaction/batch PATCH entries.

    Operations run one at a time so a failure names its index, op and path. The reason is our own
    sentence, not jsonpatch's: its messages hold the whole document ("{document} is not equal to
    tested value", "member 'a' not found in {document}"), which a diagnostics line must not echo.
    """
    where = f"{label}: " if label else ""
    if not isinstance(operations, list):
        raise FhirError(400, f"{where}a JSON Patch body must be a JSON array of operations")
    steps = []
    for index, operation in enumerate(operations):
        try:
            steps.append(jsonpatch.JsonPatch([operation]))
        except (jsonpatch.InvalidJsonPatch, jsonpointer.JsonPointerException, TypeError) as exc:
            raise FhirError(400, f"{where}invalid JSON Patch: operation {index}: {_clip(str(exc))}") from None
    patched = copy.deepcopy(resource)
    for index, (operation, step) in enumerate(zip(operations, steps, strict=True)):
        try:
            patched = step.apply(patched, in_place=True, atomic=True)
        except (jsonpatch.InvalidJsonPatch, TypeError) as exc:
            raise FhirError(400, f"{where}invalid JSON Patch: operation {index}: {_clip(str(exc))}") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            reason = _patch_failure(operation, patched, exc)
            raise FhirError(
                422,
                f"{where}JSON Patch operation {index} ({_describe(operation)}) cannot be applied: {reason}",
            ) from None
    return patched


_MAX_ECHO = 100
"""Characters of client-sent text (an op, a path) a diagnostics line repeats."""
_MISSING = object()


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ECHO else text[:_MAX_ECHO] + "…"


def _describe(operation: Mapping[str, Any]) -> str:
    """`replace '/active'`, or `move '/a' to '/b'` for the ops that take `from`."""
    op, path = operation.get("op"), _clip(repr(operation.get("path")))
    if op in ("move", "copy"):
        return f"{op} {_clip(repr(operation.get('from')))} to {path}"
    return f"{op} {path}"


def _resolves(document: Any, pointer: Any) -> bool:
    try:
        return jsonpointer.JsonPointer(pointer).resolve(document, _MISSING) is not _MISSING
    except (jsonpointer.JsonPointerException, TypeError, AttributeError):
        return False


def _patch_failure(operation: Mapping[str, Any], document: Any, exc: Exception) -> str:
    """Why `operation` could not be applied to `document`, without quoting `document`."""
    op, path = operation.get("op"), operation.get("path")
    if isinstance(exc, jsonpatch.JsonPatchTestFailed) and _resolves(document, path):
        return f"the value at {_clip(repr(path))} is not the tested value"
    needed = [operation.get("from")] if op in ("move", "copy") else []
    needed.append(str(path).rpartition("/")[0] if op in ("add", "move", "copy") else path)
    for pointer in needed:
        if not _resolves(document, pointer):
            return f"{_clip(repr(pointer))} does not exist in the resource"
    return _clip(str(exc))  # the rest ("can't insert outside of list", …) quote no document


def apply_patch(operations: Any, resource: dict[str, Any], label: str = "") -> dict[str, Any]:
    """A JSON Patch (a list) or a FHIRPath Patch (a Parameters resource) applied to a copy."""
    if is_fhirpath_patch(operations):
        kind = str(resource.get("resourceType"))

        def is_list(_: dict[str, Any], path: str, name: str) -> bool:
            names = [step for step in re.findall(r"\.([A-Za-z]\w*)(?!\()", path[len(kind) :])]
            return repeats(kind, [*names, name])

        try:
            return apply_fhirpath_patch(operations, resource, is_list)
        except FhirError as error:
            if label:
                raise FhirError(error.status, f"{label}: {error.diagnostics}") from None
            raise
    return apply_json_patch(operations, resource, label)


def patch(
    fhir: EmbeddedFhir,
    store_id: str,
    resource_type: str,
    resource_id: str,
    operations: Any,
    if_match: str | None = None,
) -> FhirResult:
    """JSON Patch (RFC 6902) or FHIRPath Patch on the current version; the result must still be a
    valid resource."""
    check_type(resource_type)
    with fhir.writing(store_id) as tx:
        current = _existing(tx, resource_type, resource_id)
        if current.deleted or current.resource is None:
            raise FhirError(410, f"{resource_type}/{resource_id} was deleted")
        _check_if_match(if_match, current, f"{resource_type}/{resource_id}")
        patched = apply_patch(operations, current.resource)
        if isinstance(patched, dict) and patched.get("id") != resource_id:
            raise FhirError(422, f"a patch may not change the id of {resource_type}/{resource_id}")
        stored = tx.put(check_resource(patched, resource_type, resource_id), resource_id)
    return FhirResult(200, stored, version_headers(stored))


def conditional_patch(
    fhir: EmbeddedFhir,
    store_id: str,
    resource_type: str,
    pairs: Sequence[tuple[str, str]],
    operations: Any,
    if_match: str | None = None,
) -> FhirResult:
    """`PATCH [type]?criteria` (R4 http.html "patch"): one match is patched, none is 404, more 412."""
    check_type(resource_type)
    with fhir.reading(store_id) as index:
        found = conditional_matches(index.search_index, resource_type, pairs, "conditional patch")
    if len(found) > 1:
        raise FhirError(412, f"conditional patch matches {len(found)} {resource_type} resources")
    if not found:
        raise FhirError(404, f"conditional patch: no {resource_type} matches {urlencode(list(pairs))!r}")
    return patch(fhir, store_id, resource_type, found[0]["id"], operations, if_match)


def delete(
    fhir: EmbeddedFhir, store_id: str, resource_type: str, resource_id: str, if_match: str | None = None
) -> FhirResult:
    check_type(resource_type)
    with fhir.writing(store_id) as tx:
        current = tx.current(resource_type, resource_id)
        if current is None or current.deleted:  # R4 http.html "delete": SHOULD 200/204 for either
            return FhirResult(204)
        _check_if_match(if_match, current, f"{resource_type}/{resource_id}")
        version = tx.delete(resource_type, resource_id)
    return FhirResult(204, None, {"ETag": f'W/"{version}"'})


def parse_json(raw: bytes) -> Any:
    """The request body as JSON; 400 when it is not JSON at all or nested too deeply to process."""
    too_deep = f"the body is nested more than {MAX_JSON_DEPTH} levels deep"
    try:
        value = json.loads(raw)
    except RecursionError:
        raise FhirError(400, too_deep) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise FhirError(400, f"the body is not valid JSON: {exc}") from None
    if nested_deeper_than(value):
        raise FhirError(400, too_deep)
    return value
