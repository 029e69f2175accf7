"""The FHIR R4 read and write interactions of the sandbox surface (docs/sandboxes.md), over an
`EmbeddedFhir` store: read, vread, create, update, patch, delete and their conditional forms.

Each action takes parsed request parts and returns a `FhirResult` (`results`); failures raise
`FhirError` (turned into OperationOutcome once, in the router). Search is `searching`, history is
`history`, patch bodies are `json_patch`.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

from assay.sandboxes.fhir.json_patch import apply_patch
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.resources import check_resource, check_type, parse_etag
from assay.sandboxes.fhir.results import (
    FhirResult,
    existing_version,
    version_headers,
    version_location,
    written,
)
from assay.sandboxes.fhir.searching import (
    IGNORED_PARAMETERS,
    run_search,
)
from assay.sandboxes.fhir.store import EmbeddedFhir
from assay.sandboxes.fhir.subsetting import Subset
from assay.sandboxes.json_depth import MAX_JSON_DEPTH, nested_deeper_than

__all__ = [
    "Searchable",
    "conditional_delete",
    "conditional_matches",
    "conditional_patch",
    "conditional_update",
    "create",
    "delete",
    "patch",
    "read",
    "update",
    "vread",
]


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


# -- search --------------------------------------------------------------------------------------


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
        if name not in IGNORED_PARAMETERS:
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
    criteria = [(k, v) for k, v in pairs if k not in IGNORED_PARAMETERS]
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
    return FhirResult(201, stored, {**version_headers(stored), "Location": version_location(base, stored)})


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
        current = existing_version(tx, resource_type, resource_id)
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
