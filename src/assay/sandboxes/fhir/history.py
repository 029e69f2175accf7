"""The history interactions (R4 http.html#history): one resource's versions, a type's and the whole
store's, newest first, as a history Bundle paged like a search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from assay.sandboxes.fhir.index import VersionRow
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.resources import check_type
from assay.sandboxes.fhir.results import (
    FhirResult,
)
from assay.sandboxes.fhir.searching import (
    DEFAULT_COUNT,
    IGNORED_PARAMETERS,
    MAX_COUNT,
    nonnegative,
    page_links,
)
from assay.sandboxes.fhir.store import EmbeddedFhir
from assay.store import iso

__all__ = ["Paging", "history", "store_history", "to_instant"]


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
class Paging:
    """The paging parameters every history interaction takes (instance, type and system), and
    `$everything` too."""

    count: int = DEFAULT_COUNT
    offset: int = 0
    since: datetime | None = None

    def taking(self, name: str, value: str) -> Paging | None:
        """These parameters with `_count` (max 1000), `_offset` (or a paging link's
        `_getpagesoffset`) or `_since` set from one query parameter; None for any other name."""
        if name == "_count":
            return replace(self, count=min(nonnegative(name, value), MAX_COUNT))
        if name in ("_offset", "_getpagesoffset"):
            return replace(self, offset=nonnegative(name, value))
        if name == "_since":
            return replace(self, since=to_instant(name, value))
        return None


def _history_request(pairs: Sequence[tuple[str, str]]) -> Paging:
    """`_count` (default 50, max 1000), `_offset` and `_since`; 400 for any other parameter."""
    paging = Paging()
    for name, value in pairs:
        taken = paging.taking(name, value)
        if taken is not None:
            paging = taken
        elif name not in IGNORED_PARAMETERS:
            raise FhirError(400, f"_history takes _count, _offset and _since, not {name!r}")
    return paging


def _history_bundle(
    path: str,
    pairs: Sequence[tuple[str, str]],
    request: Paging,
    total: int,
    entries: list[dict[str, Any]],
) -> FhirResult:
    links = page_links(path, pairs, request.count, request.offset, total)
    bundle = {"resourceType": "Bundle", "type": "history", "total": total, "link": links, "entry": entries}
    return FhirResult(200, bundle)


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
