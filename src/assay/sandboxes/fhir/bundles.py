"""`transaction` and `batch` bundles posted to the FHIR base (docs/sandboxes.md, FHIR R4 §3.1.0.11).

A transaction is atomic: all its writes go through one `WriteTransaction` and any failing entry
rolls everything back with that entry's status (an `If-Match` mismatch is a 409 version conflict
here). As FHIR says, a POST gets a server-assigned id, and every reference to the entry's
`urn:uuid:` (or other) fullUrl is rewritten to the new `Type/id`; entries run in FHIR's order
DELETE, POST, PUT/PATCH, GET and answer in the request's order. A batch runs each entry on its own.

Conditional references (`"reference": "Patient?identifier=urn:mrn|42"`, R4 http.html "Transaction
Processing Rules") in what a transaction writes are resolved to the one matching `Type/id` with
the store's own search (`conditional_matches`); none or several matches are 412 naming the entry
and the reference, a bad query 400. See `ConditionalReferences` for which state is searched. Batch
entries and plain create and update keep such references as sent: R4 defines them for
transactions only, and a batch of PUTs is how a dataset loaded per docs/sandboxes.md (which leaves
unresolvable ones alone) is seeded into an external server, Assay's own included.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from assay.formats.fhir import FhirStore, is_resource_type
from assay.formats.fhir.bundles import ConditionalReference, parse_conditional_reference
from assay.sandboxes.fhir import actions
from assay.sandboxes.fhir.actions import conditional_matches
from assay.sandboxes.fhir.json_patch import apply_patch
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.resources import check_resource, check_type, parse_etag, rewrite_references
from assay.sandboxes.fhir.results import FhirResult, version_headers, written
from assay.sandboxes.fhir.searching import search
from assay.sandboxes.fhir.store import EmbeddedFhir, WriteTransaction

__all__ = ["ConditionalReferences", "parse_entry", "post_bundle"]

Key = tuple[str, str]
_STATUS_TEXT = {200: "200 OK", 201: "201 Created", 204: "204 No Content"}
_ORDER = {"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 2, "GET": 3, "HEAD": 3}


@dataclass
class _Entry:
    position: int
    method: str
    resource_type: str
    resource_id: str | None
    query: str | None
    resource: Any
    full_url: str | None
    if_none_exist: str | None
    if_match: str | None


def parse_entry(position: int, entry: Any, base: str) -> _Entry:
    """One transaction/batch entry's request, or an error naming the entry: 400 for a malformed
    request, 422 when a POST or PUT writes a resource of no R4 type (invalid resource in docs/sandboxes.md),
    else 404 when the url names an unknown type (what that request alone answers)."""
    where = f"entry {position}"
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        raise FhirError(400, f"{where}: every entry needs a request {{method, url}}")
    request = entry["request"]
    method = str(request.get("method", "")).upper()
    url = request.get("url")
    if method not in _ORDER or not isinstance(url, str) or not url:
        raise FhirError(400, f"{where}: request needs a method (GET, POST, PUT, PATCH, DELETE) and a url")
    if url.startswith(base + "/"):
        url = url[len(base) + 1 :]
    path, _, query = url.partition("?")
    parts = [p for p in path.strip("/").split("/") if p]
    if not parts:
        raise FhirError(400, f"{where}: request url {url!r} names no resource type")
    resource = entry.get("resource")
    if method in ("POST", "PUT") and isinstance(resource, dict):
        kind = resource.get("resourceType")
        if not isinstance(kind, str) or not is_resource_type(kind):
            raise FhirError(422, f"{where}: unknown resourceType {kind!r}")
    check_type(parts[0])
    conditions = {key: request.get(key) for key in ("ifNoneExist", "ifMatch")}
    for key, condition in conditions.items():
        if condition is not None and not isinstance(condition, str):
            raise FhirError(400, f"{where}: request.{key} must be a string")
    full_url = entry.get("fullUrl") if isinstance(entry.get("fullUrl"), str) else None
    return _Entry(
        position, method, parts[0], parts[1] if len(parts) > 1 else None, query or None,
        resource, full_url, conditions["ifNoneExist"], conditions["ifMatch"],
    )  # fmt: skip


def _response(result: FhirResult, base: str) -> dict[str, Any]:
    response: dict[str, Any] = {"status": _STATUS_TEXT.get(result.status, str(result.status))}
    if "Location" in result.headers:
        response["location"] = result.headers["Location"].removeprefix(base + "/")
    if "ETag" in result.headers:
        response["etag"] = result.headers["ETag"]
    meta = result.body.get("meta") if isinstance(result.body, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("lastUpdated"), str) and "ETag" in result.headers:
        response["lastModified"] = meta["lastUpdated"]  # an instant here, not the header's HTTP-date
    entry: dict[str, Any] = {"response": response}
    if result.body is not None:
        entry["resource"] = result.body
    return entry


def post_bundle(fhir: EmbeddedFhir, store_id: str, base: str, body: Any) -> FhirResult:
    if not isinstance(body, dict) or body.get("resourceType") != "Bundle":
        raise FhirError(422, "POST to the FHIR base takes a Bundle of type transaction or batch")
    kind = body.get("type")
    entries = body.get("entry") or []
    if not isinstance(entries, list):
        raise FhirError(400, "Bundle.entry must be an array")
    run = {"batch": _batch, "transaction": _transaction}.get(kind) if isinstance(kind, str) else None
    if run is None:
        raise FhirError(422, f"Bundle.type {kind!r}: the FHIR base takes transaction or batch bundles")
    response = {
        "resourceType": "Bundle",
        "type": f"{kind}-response",
        "entry": run(fhir, store_id, base, entries),
    }
    return FhirResult(200, response)


# -- conditional references ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Writes:
    """What a transaction writes, as conditional references see it: its POST and PUT resources
    (ids assigned, fullUrl references rewritten) and every key it writes or deletes."""

    store: FhirStore
    replaced: frozenset[Key]


@dataclass
class ConditionalReferences:
    """Resolves the conditional references of one transaction inside its write transaction (R4 http.html "Transaction Processing Rules"), each text once.

    The state searched is the store before the transaction with the transaction's own writes in
    place (FHIR processes deletes and creates before the entries that reference them): a resource
    it deletes or writes no longer matches as it was, and what its POST and PUT entries write
    matches as sent. PATCH entries do not count (their result is known only when they run), and
    a PATCH result's references are not resolved: the entry's resource is the patch, and the
    rest is what was stored (where dataset loading may have left an unresolvable one, docs/sandboxes.md).
    """

    tx: WriteTransaction
    aliases: Mapping[str, str]
    """fullUrl → `Type/id` of the transaction's entries, rewritten first."""
    writes: Callable[[], _Writes]
    """Builds the transaction's writes on the first conditional reference (most have none)."""
    _writes: _Writes | None = field(default=None, init=False, repr=False)
    _answers: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def rewrite(self, resource: dict[str, Any], position: int, conditional: bool = True) -> dict[str, Any]:
        """`resource` with its fullUrl references and, when `conditional`, its conditional
        references rewritten, in place."""
        if not conditional:
            return rewrite_references(resource, self.aliases.get)
        return rewrite_references(resource, lambda text: self._local(text, position))

    def _local(self, text: str, position: int) -> str | None:
        if text in self.aliases:
            return self.aliases[text]
        conditional = parse_conditional_reference(text)
        if conditional is None:
            return None
        if text not in self._answers:
            self._answers[text] = self._resolve(
                conditional, f"entry {position}: conditional reference {text!r}"
            )
        return self._answers[text]

    def _resolve(self, conditional: ConditionalReference, label: str) -> str:
        kind = conditional.resource_type
        if not is_resource_type(kind):
            raise FhirError(400, f"{label}: unknown resource type {kind}")
        pairs = conditional.criteria
        if not pairs:
            raise FhirError(400, f"{label}: no search parameter to match on")
        if self._writes is None:
            self._writes = self.writes()
        try:
            found = [
                r
                for r in conditional_matches(self.tx, kind, pairs)
                if (kind, r["id"]) not in self._writes.replaced
            ]
            found += conditional_matches(self._writes.store, kind, pairs)
        except FhirError as error:
            raise FhirError(error.status, f"{label}: {error.diagnostics}") from None
        if len(found) != 1:
            matched = f"{len(found)} {kind} resources" if found else f"no {kind}"
            raise FhirError(412, f"{label} matches {matched}; it must match exactly one")
        return f"{kind}/{found[0]['id']}"


# -- batch ---------------------------------------------------------------------------------------


def _batch(fhir: EmbeddedFhir, store_id: str, base: str, raw_entries: list[Any]) -> list[dict[str, Any]]:
    out = []
    for position, raw in enumerate(raw_entries):
        try:
            entry = parse_entry(position, raw, base)
            out.append(_response(_run_alone(fhir, store_id, base, entry), base))
        except FhirError as error:
            out.append({"response": {"status": str(error.status), "outcome": error.outcome()}})
    return out


def _run_alone(fhir: EmbeddedFhir, store_id: str, base: str, e: _Entry) -> FhirResult:
    """One batch entry, as the plain interaction would run it: conditional references are kept as
    sent (R4 defines them for transactions only)."""
    if e.method == "POST":
        return actions.create(fhir, store_id, base, e.resource_type, e.resource, e.if_none_exist)
    if e.method in ("GET", "HEAD"):
        if e.resource_id is None:
            return search(fhir, store_id, base, e.resource_type, parse_qsl(e.query or ""))
        return actions.read(fhir, store_id, e.resource_type, e.resource_id)
    if e.resource_id is None and e.query and e.method in ("PUT", "DELETE"):
        criteria = parse_qsl(e.query, keep_blank_values=True)
        if e.method == "PUT":
            return actions.conditional_update(
                fhir, store_id, base, e.resource_type, criteria, e.resource, e.if_match
            )
        return actions.conditional_delete(fhir, store_id, e.resource_type, criteria)
    if e.resource_id is None:
        raise FhirError(400, f"entry {e.position}: {e.method} needs a url Type/id")
    if e.method == "PUT":
        return actions.update(fhir, store_id, base, e.resource_type, e.resource_id, e.resource, e.if_match)
    if e.method == "PATCH":
        operations = _patch_operations(e.resource, f"entry {e.position}")
        return actions.patch(fhir, store_id, e.resource_type, e.resource_id, operations, e.if_match)
    return actions.delete(fhir, store_id, e.resource_type, e.resource_id, e.if_match)


# -- transaction ---------------------------------------------------------------------------------


def _transaction(
    fhir: EmbeddedFhir, store_id: str, base: str, raw_entries: list[Any]
) -> list[dict[str, Any]]:
    entries = [parse_entry(i, raw, base) for i, raw in enumerate(raw_entries)]
    results: dict[int, FhirResult] = {}
    with fhir.writing(store_id) as tx:
        ids, reused, unmatched = _assign_ids(tx, entries)
        urls = {
            e.full_url: f"{e.resource_type}/{ids[e.position]}"
            for e in entries
            if e.full_url and e.position in ids
        }
        references = ConditionalReferences(tx, urls, lambda: _transaction_writes(entries, ids, reused, urls))
        touched: set[tuple[str, str]] = set()
        for entry in sorted(entries, key=lambda e: _ORDER[e.method]):
            if entry.position in unmatched:  # a conditional DELETE that matched nothing
                results[entry.position] = FhirResult(204)
                continue
            key = (entry.resource_type, ids.get(entry.position) or entry.resource_id or "")
            if entry.method != "GET" and entry.method != "HEAD" and key in touched:
                raise FhirError(
                    400, f"entry {entry.position}: {key[0]}/{key[1]} is written twice in one transaction"
                )
            touched.add(key)
            results[entry.position] = _run_in(tx, base, entry, ids, reused, references)
    return [_response(results[i], base) for i in range(len(entries))]


def _transaction_writes(
    entries: list[_Entry], ids: dict[int, str], reused: set[int], urls: Mapping[str, str]
) -> _Writes:
    """The resources a transaction's POST and PUT entries write and the keys its POST, PUT and
    DELETE entries replace. A PATCH's key is not among them: the search is of the state before
    the transaction, so its pre-transaction version stands in for the result."""
    resources: list[dict[str, Any]] = []
    replaced: set[Key] = set()
    for e in entries:
        rid = ids.get(e.position)
        if rid is None or e.position in reused or e.method not in ("POST", "PUT", "DELETE"):
            continue
        replaced.add((e.resource_type, rid))
        body = e.resource
        if e.method != "DELETE" and isinstance(body, dict) and body.get("resourceType") == e.resource_type:
            resources.append(rewrite_references({**copy.deepcopy(body), "id": rid}, urls.get))
    return _Writes(FhirStore(resources), frozenset(replaced))


def _conditional_target(tx: WriteTransaction, e: _Entry) -> str | None:
    """The id a conditional PUT or DELETE (`Type?criteria`) acts on; None when nothing matches.

    Matches are searched in the state before the transaction, like FHIR's conditional create.
    """
    found = conditional_matches(
        tx, e.resource_type, e.query or "", f"entry {e.position}: conditional {e.method}"
    )
    if len(found) > 1:
        raise FhirError(412, f"entry {e.position}: conditional {e.method} matches {len(found)} resources")
    body_id = e.resource.get("id") if isinstance(e.resource, dict) else None
    if found and body_id is not None and body_id != found[0]["id"]:
        raise FhirError(
            400,
            f"entry {e.position}: conditional PUT matches {e.resource_type}/{found[0]['id']}, body id {body_id!r}",
        )
    if found:
        return str(found[0]["id"])
    if e.method == "PUT":
        return body_id if isinstance(body_id, str) else str(uuid.uuid4())
    return None


def _assign_ids(tx: WriteTransaction, entries: list[_Entry]) -> tuple[dict[int, str], set[int], set[int]]:
    """Server ids for POST entries (existing ones for a matched `ifNoneExist`), URL ids for PUT,
    matched ids for conditional PUT/DELETE; and the positions reused and matching nothing."""
    ids: dict[int, str] = {}
    reused: set[int] = set()
    unmatched: set[int] = set()
    for e in entries:
        if e.method in ("PUT", "DELETE") and e.resource_id is None and e.query:
            target = _conditional_target(tx, e)
            if target is None:
                unmatched.add(e.position)
            else:
                ids[e.position] = target
            continue
        if e.method == "POST":
            if e.if_none_exist:
                found = conditional_matches(tx, e.resource_type, e.if_none_exist)
                if len(found) > 1:
                    raise FhirError(412, f"entry {e.position}: ifNoneExist matches {len(found)} resources")
                if found:
                    ids[e.position] = found[0]["id"]
                    reused.add(e.position)
                    continue
            ids[e.position] = str(uuid.uuid4())
        elif e.method in ("PUT", "PATCH", "DELETE") and e.resource_id is not None:
            ids[e.position] = e.resource_id
    return ids, reused, unmatched


def _patch_operations(resource: Any, label: str) -> Any:
    """A transaction PATCH entry's patch (R4 http.html "Transaction"): a Binary whose `data` is a
    base64 JSON Patch (`contentType` application/json-patch+json), a FHIRPath Patch Parameters,
    or (as before) the JSON Patch array itself."""
    if not (isinstance(resource, dict) and resource.get("resourceType") == "Binary"):
        return resource
    if resource.get("contentType") != "application/json-patch+json":
        raise FhirError(400, f"{label}: a Binary patch needs contentType application/json-patch+json")
    try:
        return json.loads(base64.b64decode(str(resource.get("data", "")), validate=True))
    except (ValueError, binascii.Error):
        raise FhirError(400, f"{label}: the Binary's data is not a base64 JSON Patch") from None


def _search_after_writes(tx: WriteTransaction, kind: str, query: str | None) -> list[dict[str, Any]]:
    """A transaction's GET search, run after its writes (R4 http.html "Transaction Processing
    Rules": GETs are processed last, so they see what the transaction wrote): the state before it
    without what it replaced, plus what it wrote that matches."""

    def matches(store: Any) -> list[dict[str, Any]]:
        return conditional_matches(store, kind, query) if query else store.search(kind, {})

    writes = tx.written(kind)
    found = [r for r in matches(tx) if r["id"] not in writes]
    current = [r for r in writes.values() if r is not None]
    return found + (matches(FhirStore(current)) if current else [])


def _run_in(
    tx: WriteTransaction,
    base: str,
    e: _Entry,
    ids: dict[int, str],
    reused: set[int],
    references: ConditionalReferences,
) -> FhirResult:
    label = f"entry {e.position}: {e.resource_type}/{ids.get(e.position, e.resource_id)}"
    if e.method in ("GET", "HEAD"):
        if e.resource_id is None:
            found = _search_after_writes(tx, e.resource_type, e.query)
            bundle = {"resourceType": "Bundle", "type": "searchset", "total": len(found),
                      "entry": [{"resource": r, "search": {"mode": "match"}} for r in found]}  # fmt: skip
            return FhirResult(200, bundle)
        current = tx.current(e.resource_type, e.resource_id)
        if current is None or current.resource is None:
            raise FhirError(404 if current is None else 410, f"{label} is not available")
        return FhirResult(200, current.resource, version_headers(current.resource))
    rid = ids.get(e.position)
    if rid is None:
        raise FhirError(400, f"entry {e.position}: {e.method} needs a url Type/id")
    current = tx.current(e.resource_type, rid)
    if e.method == "POST" and e.position in reused:
        assert current is not None and current.resource is not None
        return FhirResult(200, current.resource, version_headers(current.resource))
    if e.if_match is not None:
        wanted = parse_etag(e.if_match)
        if current is None or current.deleted or current.version_id != wanted:
            raise FhirError(409, f"{label}: version conflict (If-Match {wanted})")
    if e.method == "DELETE":
        if current is None or current.deleted:
            return FhirResult(204)
        version = tx.delete(e.resource_type, rid)
        return FhirResult(204, None, {"ETag": f'W/"{version}"'})
    if e.method == "PATCH":
        if current is None or current.resource is None:
            raise FhirError(404 if current is None else 410, f"{label} is not available")
        resource = apply_patch(_patch_operations(e.resource, label), current.resource, label)
    else:
        by_url = e.method == "PUT" and e.resource_id is not None  # a conditional PUT's id was checked
        resource = copy.deepcopy(check_resource(e.resource, e.resource_type, rid if by_url else None))
    resource = references.rewrite(resource, e.position, conditional=e.method != "PATCH")
    return written(base, tx.put(check_resource(resource, e.resource_type), rid), current)
