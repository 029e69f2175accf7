"""Reading a playground's whole state back from an external server, for `complete` (docs/snapshots.md).

One search per resource type the server serves (its CapabilityStatement, intersected with R4's
types), following `next` links. Any answer that is not a searchset — a 4xx or 5xx on one type, a
metadata call that fails — raises `ExternalFhirFailed`: a capture that silently skipped a type would
score the agent on a state with resources missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import httpx

from assay.formats.fhir.parameters import resource_types
from assay.sandboxes.fhir.external.spaces import answered_object, server_failed

__all__ = ["read_everything"]

PAGE_SIZE = 1000
READERS = 8
"""Searches in flight at once during a capture (httpx clients are thread-safe)."""


def _get(client: httpx.Client, url: str, headers: dict[str, str], what: str) -> dict[str, Any]:
    """The JSON object the server answers 200 to `GET url`; `ExternalFhirFailed` naming `what`
    otherwise (its message answers `complete`, so the URL goes only into its `detail`)."""
    try:
        response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise server_failed(what, "GET", url, exc) from None
    if response.status_code != 200:
        raise server_failed(what, "GET", url, response)
    return answered_object(response, what)


def served_types(client: httpx.Client, base: str, headers: dict[str, str]) -> list[str]:
    """R4 resource types the server's CapabilityStatement lists (all of R4's when it lists none)."""
    statement = _get(client, f"{base}/metadata", headers, "read its CapabilityStatement for the capture")
    listed = {
        str(resource.get("type"))
        for rest in _listed(statement.get("rest"))
        if isinstance(rest, dict)
        for resource in _listed(rest.get("resource"))
        if isinstance(resource, dict)
    }
    known = resource_types()
    return sorted(known & listed if listed else known)


def _read_type(
    client: httpx.Client, base: str, headers: dict[str, str], kind: str, params: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    url: str | None = f"{base}/{kind}?" + urlencode([*params, ("_count", str(PAGE_SIZE))])
    while url:
        bundle = _get(client, url, headers, f"search {kind} for the capture")
        found += [resource for entry in _listed(bundle.get("entry")) if (resource := _matched(entry))]
        url = _next_page(bundle)
    return found


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _matched(entry: Any) -> dict[str, Any] | None:
    """An entry's resource when the search matched it (not an `_include`d one)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("resource"), dict):
        return None
    search = entry.get("search")
    mode = search.get("mode", "match") if isinstance(search, dict) else "match"
    return entry["resource"] if mode == "match" else None


def _next_page(bundle: dict[str, Any]) -> str | None:
    """The searchset's `next` link, or None (also for links that are not `{relation, url}` objects:
    the server's answer is read, never trusted to be well formed)."""
    for link in _listed(bundle.get("link")):
        if isinstance(link, dict) and link.get("relation") == "next" and isinstance(link.get("url"), str):
            return str(link["url"])
    return None


def read_everything(
    client: httpx.Client, base: str, headers: dict[str, str], params: Sequence[tuple[str, str]] = ()
) -> list[dict[str, Any]]:
    """Every resource a search of each served type finds at `base` (with `params` ANDed), as stored,
    in type order. `READERS` types are read at once: ~146 sequential searches cost 146 round trips,
    seconds per `complete` on a server across a network."""
    kinds = served_types(client, base, headers)
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        pages = list(pool.map(lambda kind: _read_type(client, base, headers, kind, params), kinds))
    return [resource for page in pages for resource in page]
