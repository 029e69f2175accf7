"""Structural rules for resources written through the REST surface (docs/sandboxes.md: 422 when invalid).

Writes are checked structurally, not against profiles: a JSON object, a known R4 `resourceType`,
an id matching the FHIR `id` datatype (`[A-Za-z0-9\\-\\.]{1,64}`), and the type and id the URL
names. Strict profile validation (fhir.resources) is left to the caller to add.

`rewrite_references` is re-exported from `assay.formats.fhir.bundles`, the one walker dataset
loading uses too.
"""

from __future__ import annotations

import re
from typing import Any

from assay.formats.fhir.bundles import rewrite_references
from assay.formats.fhir.parameters import is_resource_type
from assay.sandboxes.fhir.outcomes import FhirError

__all__ = [
    "ID_PATTERN",
    "check_resource",
    "check_type",
    "next_version",
    "parse_etag",
    "rewrite_references",
    "stamp",
]

ID_PATTERN = re.compile(r"[A-Za-z0-9\-.]{1,64}")
_ETAG = re.compile(r'^\s*(?:W/)?"?([^"\s]+)"?\s*$')


def check_type(resource_type: str) -> None:
    """404 for a type the R4 model does not have (a URL that names no endpoint)."""
    if not is_resource_type(resource_type):
        raise FhirError(404, f"unknown resource type {resource_type!r}", "not-supported")


def check_resource(
    body: Any, resource_type: str | None = None, resource_id: str | None = None
) -> dict[str, Any]:
    """The body as a resource, or 422 naming the broken rule.

    Args:
        body: the parsed JSON body.
        resource_type: the type the URL names, when it names one.
        resource_id: the id the URL names (update, patch); the body must carry the same id.
    """
    if not isinstance(body, dict):
        raise FhirError(422, "the body must be a JSON object (a FHIR resource)")
    kind = body.get("resourceType")
    if not isinstance(kind, str) or not is_resource_type(kind):
        raise FhirError(422, f"unknown resourceType {kind!r}")
    if resource_type is not None and kind != resource_type:
        raise FhirError(422, f"resourceType {kind} does not match the URL's {resource_type}")
    rid = body.get("id")
    if resource_id is not None:
        # R4 http.html "update": no id, or one that disagrees with the URL's, SHALL be a 400.
        if rid is None:
            raise FhirError(400, f"the resource must carry id {resource_id!r} to update {kind}/{resource_id}")
        if rid != resource_id:
            raise FhirError(400, f"resource id {rid!r} does not match the URL's {resource_id!r}")
    if rid is not None and (not isinstance(rid, str) or not ID_PATTERN.fullmatch(rid)):
        raise FhirError(422, f"invalid id {rid!r}: ids are 1-64 of A-Z a-z 0-9 - .")
    meta = body.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise FhirError(422, "meta must be a JSON object")
    return body


def stamp(resource: dict[str, Any], resource_id: str, version_id: str, last_updated: str) -> dict[str, Any]:
    """A copy with the server-owned `id`, `meta.versionId` and `meta.lastUpdated` set."""
    meta = dict(resource.get("meta") or {})
    meta["versionId"] = version_id
    meta["lastUpdated"] = last_updated
    stamped = {"resourceType": resource["resourceType"], "id": resource_id}
    stamped.update((k, v) for k, v in resource.items() if k not in ("resourceType", "id", "meta"))
    stamped["meta"] = meta
    return stamped


def next_version(current: str | None, count: int) -> str:
    """The version after `current`: +1 when numeric, else the number of versions so far + 1."""
    if current is not None and current.isdigit():
        return str(int(current) + 1)
    return str(count + 1)


def parse_etag(value: str) -> str:
    """The version id inside an `If-Match` / `ETag` value such as `W/"3"`; 400 when unreadable."""
    found = _ETAG.match(value)
    if not found:
        raise FhirError(400, f'unreadable If-Match value {value!r} (expected W/"<versionId>")')
    return found.group(1)
