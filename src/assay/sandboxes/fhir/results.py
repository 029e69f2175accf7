"""What every FHIR interaction answers with: a `FhirResult` and the version headers of the
resource it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

from assay.sandboxes.fhir.index import Current
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.store import WriteTransaction

__all__ = ["FhirResult", "existing_version", "http_date", "version_headers", "version_location", "written"]


@dataclass
class FhirResult:
    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    """The body already rendered (`rendering.render_json`): a search answer from `SearchAnswers`
    comes as bytes only (`body` None)."""


def existing_version(tx: WriteTransaction, resource_type: str, resource_id: str) -> Current:
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


def version_location(base: str, resource: dict[str, Any]) -> str:
    return f"{base}/{resource['resourceType']}/{resource['id']}/_history/{resource['meta']['versionId']}"


def written(base: str, stored: dict[str, Any], before: Current | None) -> FhirResult:
    """The answer to an update of `stored`: 201 with a Location when it (re)created the resource
    (`before` is None or a delete), else 200; version headers either way."""
    created = before is None or before.deleted
    headers = version_headers(stored)
    if created:
        headers["Location"] = version_location(base, stored)
    return FhirResult(201 if created else 200, stored, headers)
