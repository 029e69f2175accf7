"""FHIR dataset loading: a Bundle of any type to the resources it seeds (SPEC §5.1).

- `Bundle.type` and every entry `request` are ignored, except DELETE entries, which are skipped.
- Ids are kept; a missing id comes from a `urn:uuid:` fullUrl, else a new UUID.
- References to an entry's `urn:uuid:` or absolute fullUrl are rewritten to `Type/id`.
- A conditional reference (`Practitioner?identifier=sys|val`) is rewritten when exactly one
  loaded resource matches it (this bundle's, or `existing` ones), and left verbatim otherwise.
- A bundle is never rejected for its references; within a bundle the last write of a
  (type, id) wins.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from assay.formats.fhir.errors import InvalidSearch
from assay.formats.fhir.references import parse_reference
from assay.formats.fhir.store import FhirStore

__all__ = ["resources_from_bundle"]


def resources_from_bundle(
    bundle: dict[str, Any], existing: Iterable[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The resources a dataset Bundle loads, references rewritten (SPEC §5.1).

    Args:
        bundle: a FHIR Bundle (any `type`); the input is not modified.
        existing: resources already loaded (earlier datasets) that conditional references may
            resolve to.
    """
    loaded: dict[tuple[str, str], dict[str, Any]] = {}
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
        resource = copy.deepcopy(resource)
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
    conditional: list[dict[str, Any]] = []
    for resource in resources:
        _rewrite(resource, aliases, conditional)
    if conditional:
        _resolve_conditional(conditional, [*existing, *resources])
    return resources


def _rewrite(node: Any, aliases: dict[str, str], conditional: list[dict[str, Any]]) -> None:
    if isinstance(node, list):
        for item in node:
            _rewrite(item, aliases, conditional)
        return
    if not isinstance(node, dict):
        return
    reference = node.get("reference")
    if isinstance(reference, str):
        if reference in aliases:
            node["reference"] = aliases[reference]
        elif "?" in reference:
            conditional.append(node)
    for value in node.values():
        if isinstance(value, dict | list):
            _rewrite(value, aliases, conditional)


def _resolve_conditional(references: list[dict[str, Any]], resources: list[dict[str, Any]]) -> None:
    store = FhirStore(resources)
    answers: dict[str, str | None] = {}
    for node in references:
        text = node["reference"]
        if text not in answers:
            answers[text] = _match_one(store, text)
        if answers[text]:
            node["reference"] = answers[text]


def _match_one(store: FhirStore, reference: str) -> str | None:
    resource_type, _, query = reference.partition("?")
    if parse_reference(resource_type + "/x").type != resource_type or not query:
        return None
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    try:
        found = store.search(resource_type, params)
    except InvalidSearch:
        return None
    return f"{resource_type}/{found[0]['id']}" if len(found) == 1 else None
