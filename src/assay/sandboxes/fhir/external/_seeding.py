"""Writing a playground's seeded resources (loaded per docs/sandboxes.md) to an external server at `start`,
for both strategies: batches of PUTs with the ids kept, every entry's status read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from assay.sandboxes.fhir.external.spaces import server_failed

__all__ = ["SEED_HEADER", "put_in_batches"]

SEED_HEADER = "X-Assay-Seed"
"""Sent with the seeding batches: an `assay fhir-server` loads them without validating (docs/sandboxes.md:
datasets load leniently), as the embedded store loads its layers. Other servers ignore
it; the playground surface never forwards it (`isolated.py::_REQUEST_HEADERS`)."""

BATCH = 500
"""Entries per batch Bundle: large enough to seed a dataset in few round trips, small enough for
servers' request-size limits."""


def put_in_batches(
    client: httpx.Client, base_url: str, headers: Mapping[str, str], resources: Sequence[dict[str, Any]]
) -> None:
    """PUT each resource (`resourceType` and `id` set) at `base_url`, `BATCH` to a batch Bundle. A
    batch answers 200 whatever its entries did, so each entry's status is read: any that is not
    2xx, like a batch refused whole or a network error, raises `ExternalFhirFailed`."""
    what = "load the playground's datasets"
    for start in range(0, len(resources), BATCH):
        entries = [
            {
                "resource": resource,
                "request": {"method": "PUT", "url": f"{resource['resourceType']}/{resource['id']}"},
            }
            for resource in resources[start : start + BATCH]
        ]
        bundle = {"resourceType": "Bundle", "type": "batch", "entry": entries}
        try:
            response = client.post(base_url, json=bundle, headers={**headers, SEED_HEADER: "1"})
        except httpx.HTTPError as exc:
            raise server_failed(what, "POST", base_url, exc) from None
        failed = _failed_entries(response)
        if response.status_code >= 300 or failed:
            also = f" (entries answered {', '.join(failed[:5])})" if failed else ""
            raise server_failed(what + also, "POST", base_url, response)


def _failed_entries(response: httpx.Response) -> list[str]:
    try:
        body = response.json()
    except ValueError:
        return []
    entries = body.get("entry") if isinstance(body, dict) else None
    statuses = [
        str((entry.get("response") or {}).get("status", ""))
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict)
    ]
    return [status for status in statuses if not status.startswith("2")]
