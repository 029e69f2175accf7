"""The generic tag strategy (`ASSAY_FHIR_ISOLATION=tag`, the default): any FHIR R4 server.

Users who already run HAPI, Medplum or the Google Cloud Healthcare API point Assay at it; the agent
still talks to Assay's FHIR base, which forwards each interaction. Without a space per playground
(`isolated.py`), playgrounds share the server and are told apart like this:

- every resource a playground writes carries `meta.tag` `{TAG_SYSTEM}|<playground id>`, and every
  search is ANDed with that `_tag`;
- ids are namespaced: a playground's resource `Patient/x` is `Patient/<prefix>-x` on the server, and
  every reference, URL id, `_id` and reference search value is mapped both ways, so two playgrounds
  seeded with the same dataset (same ids, docs/sandboxes.md) never overwrite each other;
- creates are sent as `PUT` with a client-assigned id (the server must allow update-as-create:
  HAPI's default, `enableUpdateCreate` on Google Cloud Healthcare FHIR stores).

Known leaks and limits of this fallback (docs/decisions/fhir-external.md): a reference the agent writes to
another playground's *server* id (`Patient/<other prefix>-x`) resolves, and `_include`/`_history`
follow it; a JSON Patch may remove the tag or change the id; conditional creates are a search then
a write, not atomic; conditional update/delete and type/system `_history` are refused (501: on the
server they would reach other playgrounds); ids longer than 64 - len(prefix) characters are
refused; resources stay on the server after the task run ends. The server's base is replaced by
the agent's in every string of an answer (`hidden`), but a namespaced id quoted in free text
(`diagnostics`) keeps its prefix. A GET on the base with a query
(HAPI's paging links `[base]?_getpages=<id>&…`, a system-level search) is forwarded with the
`_tag` added, and refused (404) when the answer matches a resource without the playground's tag.

`complete` captures the playground by reading every tagged resource back (a type the server
answers with an error fails the capture, `_reading.py`) and storing it as an embedded layer, so
scoring, `rescore` and the state tar.gz never depend on the server again.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from sqlalchemy import Connection, Engine

from assay.formats.fhir import search_parameter
from assay.sandboxes.fhir.actions import parse_json
from assay.sandboxes.fhir.bundles import parse_entry
from assay.sandboxes.fhir.capability import capability_statement
from assay.sandboxes.fhir.external._reading import read_everything
from assay.sandboxes.fhir.external._seeding import put_in_batches
from assay.sandboxes.fhir.external.forwarding import (
    ForwardedRequest,
    hidden,
    is_under,
    relative_under,
    unanswered,
)
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.resources import check_resource, check_type, rewrite_references
from assay.sandboxes.fhir.results import FhirResult

__all__ = ["TAG_SYSTEM", "ExternalFhir", "TaggedFhir"]

TAG_SYSTEM = "https://assay.dev/fhir/playground"
_LOCAL_REF = re.compile(r"^([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})(/_history/[^/]+)?$")
_CONTROL = frozenset({"_count", "_offset", "_getpagesoffset", "_sort", "_format", "_summary", "_elements"})


@dataclass(frozen=True, slots=True)
class _Scope:
    """One playground on the server: its tag code and its id prefix."""

    code: str
    prefix: str

    def out(self, rid: str) -> str:
        if rid.startswith(self.prefix):
            return rid
        if len(self.prefix) + len(rid) > 64:
            raise FhirError(422, f"id {rid!r} is too long for the external server's namespacing")
        return self.prefix + rid

    def back(self, rid: str) -> str:
        return rid.removeprefix(self.prefix)

    def out_reference(self, text: str) -> str | None:
        found = _LOCAL_REF.match(text)
        if found is None:
            return None
        return f"{found[1]}/{self.out(found[2])}{found[3] or ''}"

    def back_reference(self, text: str) -> str | None:
        found = _LOCAL_REF.match(text)
        if found is None or not found[2].startswith(self.prefix):
            return None
        return f"{found[1]}/{self.back(found[2])}{found[3] or ''}"

    @property
    def tag(self) -> dict[str, str]:
        return {"system": TAG_SYSTEM, "code": self.code}


def _scope(store_id: str) -> _Scope:
    return _Scope(store_id, "a" + store_id.removeprefix("pg_").lower()[-12:] + "-")


def _only_this_playground(found: Any, scope: _Scope) -> None:
    """404 unless every matched resource of the searchset `found` carries the playground's tag: a
    page on the base names a search by the server's id alone, and the search may be another
    playground's. Nothing of such an answer is shown (not even its `total`), except when it
    matches nothing: an empty page cannot be told apart from one of this playground's, so it passes
    with its `total` (a `_getpages` id is a UUID the server made). Included resources (`search.mode`
    `include`) are not checked, as for type-level searches (the known `_include` leak)."""
    entries = found.get("entry") if isinstance(found, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        search = entry.get("search") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or (
            isinstance(search, dict) and search.get("mode", "match") != "match"
        ):
            continue
        resource = entry.get("resource")
        meta = resource.get("meta") if isinstance(resource, dict) else None
        tags = meta.get("tag") if isinstance(meta, dict) else None
        ours = {"system": TAG_SYSTEM, "code": scope.code}
        if not isinstance(tags, list) or not any(
            isinstance(tag, dict) and ours.items() <= tag.items() for tag in tags
        ):
            raise FhirError(
                404,
                "GET on the FHIR base: the external server answered with resources of another "
                "playground; this is not a page of this playground's searches",
                "not-found",
            )


def _check_entry(position: int, raw: Any, base: str) -> None:
    """The embedded surface's rules for an entry (`parse_entry`: 400 / 404 / 422), and for the
    resource a POST or PUT entry writes those of a create's or update's body (422; an id or `meta`
    of the wrong type would break the namespacing). What `forward` answers 501 alone (conditional
    update/delete, type history) is 501 as an entry. A batch fails whole, not by entry."""
    entry = parse_entry(position, raw, base)
    conditional_write = entry.method in ("PUT", "DELETE") and entry.query is not None
    if conditional_write or (entry.method == "GET" and entry.resource_id == "_history"):
        raise FhirError(
            501, f"entry {position}: {entry.method} {raw['request']['url']} is not supported with an "
            "external FHIR backend", "not-supported",
        )  # fmt: skip
    if entry.method in ("POST", "PUT") and entry.resource is not None:
        rid = entry.resource_id if entry.method == "PUT" else None
        try:
            check_resource(entry.resource, entry.resource_type, rid)
        except FhirError as exc:
            raise FhirError(exc.status, f"entry {entry.position}: {exc.diagnostics}") from None


class TaggedFhir:
    """Forwarding to one external FHIR base (no trailing slash), playgrounds told apart by tag."""

    def __init__(self, base_url: str, client: httpx.Client | None = None):
        self.base_url = base_url.rstrip("/")
        self.client = client or httpx.Client(timeout=60, headers={"Accept": "application/fhir+json"})

    # -- mapping -------------------------------------------------------------------------------

    def _outbound(
        self, resource: dict[str, Any], scope: _Scope, rid: str | None = None, base: str | None = None
    ) -> dict[str, Any]:
        """Our resource as the server stores it: namespaced id and references, plus our tag. An
        absolute reference under the agent's Assay `base` goes out relative and namespaced (it
        went out as written: the server's reference searches and the capture missed it)."""
        under_base = relative_under(base) if base is not None else lambda reference: None

        def out(reference: str) -> str | None:
            return scope.out_reference(under_base(reference) or reference)

        mapped = rewrite_references(copy.deepcopy(resource), out)
        if rid is not None or isinstance(mapped.get("id"), str):
            mapped["id"] = scope.out(rid if rid is not None else mapped["id"])
        meta = dict(mapped["meta"]) if isinstance(mapped.get("meta"), dict) else {}
        listed: list[Any] = meta["tag"] if isinstance(meta.get("tag"), list) else []
        tags = [t for t in listed if isinstance(t, dict) and t.get("system") != TAG_SYSTEM]
        meta["tag"] = [*tags, scope.tag]
        for key in ("versionId", "lastUpdated"):
            meta.pop(key, None)
        mapped["meta"] = meta
        return mapped

    def _inbound(self, value: Any, scope: _Scope, base: str) -> Any:
        """A server response as our playground shows it: ids, references, URLs and tags mapped
        back, and the server's base replaced by `base` in every other string (diagnostics,
        narratives, links: the agent never sees the server; a namespaced id quoted in free text
        keeps its prefix). An absolute reference under the server's base comes back under `base`."""
        if isinstance(value, list):
            return [self._inbound(item, scope, base) for item in value]
        if isinstance(value, str):
            return hidden(value, self.base_url, base)
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "reference" and isinstance(item, str):
                out[key] = self._reference_back(item, scope, base)
            elif key == "id" and isinstance(item, str) and "resourceType" in value:
                out[key] = scope.back(item)
            elif key in ("fullUrl", "url", "location") and isinstance(item, str):
                out[key] = hidden(self._url_back(item, scope, base), self.base_url, base)
            elif key == "tag" and isinstance(item, list):
                kept = [t for t in item if not (isinstance(t, dict) and t.get("system") == TAG_SYSTEM)]
                if kept:
                    out[key] = kept
            else:
                out[key] = self._inbound(item, scope, base)
        if isinstance(out.get("meta"), dict) and not out["meta"]:
            del out["meta"]
        return out

    def _reference_back(self, reference: str, scope: _Scope, base: str) -> str:
        relative = relative_under(self.base_url)(reference)
        if relative is None:
            return hidden(scope.back_reference(reference) or reference, self.base_url, base)
        return f"{base}/{scope.back_reference(relative) or relative}"

    def _url_back(self, url: str, scope: _Scope, base: str) -> str:
        if is_under(url, self.base_url):
            url = base + url[len(self.base_url) :]
        elif not url.startswith(("http://", "https://", "urn:")) and _LOCAL_REF.match(url.split("?")[0]):
            return scope.back_reference(url) or url
        if not is_under(url, base):
            return url
        parts = urlsplit(url)
        path = "/".join(scope.back(p) for p in parts.path.split("/"))
        query = [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k != "_tag" or TAG_SYSTEM not in v
        ]
        back = [
            (k, ",".join(scope.back_reference(x) or scope.back(x) for x in v.split(","))) for k, v in query
        ]
        rebuilt = f"{parts.scheme}://{parts.netloc}{path}"
        return rebuilt + (f"?{urlencode(back)}" if back else "")

    def _search_params(
        self, resource_type: str, pairs: Sequence[tuple[str, str]], scope: _Scope
    ) -> list[tuple[str, str]]:
        out = []
        for name, value in pairs:
            code = name.split(":")[0]
            if code == "_tag" and TAG_SYSTEM in value:
                continue
            if code == "_id":
                value = ",".join(scope.out(v) for v in value.split(","))
            elif code not in _CONTROL and not code.startswith("_"):
                parameter = search_parameter(resource_type, code)
                if parameter is not None and parameter.type == "reference":
                    value = ",".join(scope.out_reference(v) or scope.out(v) for v in value.split(","))
            out.append((name, value))
        return [*out, ("_tag", f"{TAG_SYSTEM}|{scope.code}")]

    # -- HTTP ----------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        scope: _Scope,
        base: str,
        admit: Callable[[Any, _Scope], None] | None = None,
        **kwargs: Any,
    ) -> FhirResult:
        """`method` on `path` (relative to the server's base, `""` for the base itself), the answer
        mapped back; `admit` sees a 200 answer as the server sent it and may refuse it."""
        url = self.base_url + (f"/{path}" if path else "")
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise unanswered(self.base_url, exc) from None
        body = None
        if response.content:
            try:
                found = response.json()
            except ValueError:
                raise FhirError(
                    502, f"the external FHIR server answered {response.status_code} without JSON"
                ) from None
            if admit is not None and response.status_code == 200:
                admit(found, scope)
            body = self._inbound(found, scope, base)
        headers = {k: response.headers[k] for k in ("ETag", "Last-Modified") if k in response.headers}
        for name in ("Location", "Content-Location"):
            if name in response.headers:
                mapped = self._url_back(response.headers[name], scope, base)
                headers[name] = hidden(mapped, self.base_url, base)
        return FhirResult(response.status_code, body, headers)

    # -- provisioning and capture --------------------------------------------------------------

    def provision(self, store_id: str, resources: Sequence[dict[str, Any]]) -> None:
        """Write a playground's seeded resources (already loaded per docs/sandboxes.md), tagged and with
        namespaced ids and references."""
        scope = _scope(store_id)
        put_in_batches(
            self.client, self.base_url, {}, [self._outbound(resource, scope) for resource in resources]
        )

    def snapshot(self, store_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every resource of the playground on the server, mapped back (for the capture); a type
        the server answers with an error raises `ExternalFhirFailed` rather than being skipped.
        An absolute reference under the server's base is captured as the relative `Type/id` (its
        prefix removed) the embedded store and every criterion search use."""
        scope = _scope(store_id)
        found = read_everything(self.client, self.base_url, {}, [("_tag", f"{TAG_SYSTEM}|{scope.code}")])
        relative = relative_under(self.base_url)
        return [rewrite_references(self._inbound(r, scope, self.base_url), relative) for r in found]

    # -- the interactions ----------------------------------------------------------------------

    def forward(self, request: ForwardedRequest, *, engine: Engine | None = None) -> FhirResult:
        """One REST interaction on the playground `request.store_id`. (`engine` is unused: the tag
        strategy keeps no state per playground.)"""
        scope = _scope(request.store_id)
        base, method, path, raw = request.base, request.method, request.path, request.body
        query, headers = list(request.query), request.headers
        parts = request.parts
        if not parts:
            if method == "GET" and query:
                return self._base_search(scope, base, query)
            if method != "POST":
                raise FhirError(404, "the FHIR base takes POST of a transaction or batch bundle")
            return self._bundle(scope, base, parse_json(raw))
        if parts == ["metadata"]:
            return FhirResult(200, capability_statement(base))
        if parts == ["_history"]:
            raise FhirError(
                501, "system history is not supported with an external FHIR backend", "not-supported"
            )
        kind = parts[0]
        check_type(kind)
        if (len(parts) == 1 and method == "GET") or (parts[1:] == ["_search"] and method == "POST"):
            form = (
                parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True) if method == "POST" else []
            )
            return self._send(
                "GET", kind, scope, base, params=self._search_params(kind, [*query, *form], scope)
            )
        if len(parts) == 1 and method == "POST":
            return self._create(scope, base, kind, parse_json(raw), headers.get("if-none-exist"))
        if len(parts) == 1 or parts[1] == "_history":
            # Conditional update/delete and type history would reach other playgrounds' resources
            # under the tag strategy (a search is tag-scoped, a server-side conditional write is not).
            raise FhirError(
                501, f"{method} {path} is not supported with an external FHIR backend", "not-supported"
            )
        rid = scope.out(parts[1])
        rest = "/".join(parts[2:])
        target = f"{kind}/{rid}" + (f"/{rest}" if rest else "")
        conditions = {k: v for k, v in headers.items() if k in ("if-match",)}
        if method == "GET" and len(parts) in (2, 3, 4):
            return self._send("GET", target, scope, base)
        if method == "PUT" and len(parts) == 2:
            body = self._outbound(check_resource(parse_json(raw), kind, parts[1]), scope, base=base)
            return self._send("PUT", target, scope, base, json=body, headers=conditions)
        if method == "PATCH" and len(parts) == 2:
            patch_headers = {
                **conditions,
                "Content-Type": headers.get("content-type", "application/json-patch+json"),
            }
            return self._send("PATCH", target, scope, base, content=raw, headers=patch_headers)
        if method == "DELETE" and len(parts) == 2:
            return self._send("DELETE", target, scope, base, headers=conditions)
        raise FhirError(404, f"{method} {path} is not a FHIR interaction this server supports")

    def _base_search(self, scope: _Scope, base: str, query: Sequence[tuple[str, str]]) -> FhirResult:
        """A GET on the base with a query: a system-level search or a paging link on the base
        (HAPI's `next` links are `[base]?_getpages=<id>&_getpagesoffset=…`). Forwarded with the
        playground's `_tag` added, like every search; but HAPI continues a cached search by its id
        and ignores other parameters, so the tag filters nothing there: `_only_this_playground`
        refuses any answer with a matched resource that is not the playground's."""
        params = self._search_params("", query, scope)
        return self._send("GET", "", scope, base, admit=_only_this_playground, params=params)

    def _create(
        self, scope: _Scope, base: str, kind: str, body: Any, if_none_exist: str | None
    ) -> FhirResult:
        resource = check_resource(body, kind)
        if if_none_exist:
            existing = self._existing(scope, base, kind, if_none_exist)
            if existing is not None:
                return existing
        rid = str(uuid.uuid4())
        result = self._send(
            "PUT", f"{kind}/{scope.out(rid)}", scope, base, json=self._outbound(resource, scope, rid, base)
        )
        if result.status in (200, 201):
            result.status = 201
            result.headers.setdefault("Location", f"{base}/{kind}/{rid}")
        return result

    def _existing(self, scope: _Scope, base: str, kind: str, condition: str) -> FhirResult | None:
        """A conditional create's answer when its search settles it: 200 with the one match, or the
        search's own error (a refused search is no "no match"); 412 for several matches; None when
        nothing matches and the create goes ahead. The search is the playground's (`_tag`), then
        the write: not atomic (docs/decisions/fhir-external.md)."""
        query = parse_qsl(condition.split("?", 1)[-1], keep_blank_values=True)
        found = self._send("GET", kind, scope, base, params=self._search_params(kind, query, scope))
        if found.status != 200:
            return found
        matches = [
            entry["resource"]
            for entry in (found.body or {}).get("entry") or []
            if isinstance(entry, dict) and isinstance(entry.get("resource"), dict)
        ]
        if len(matches) > 1:
            raise FhirError(412, f"If-None-Exist {condition!r} matches {len(matches)} resources")
        return FhirResult(200, matches[0]) if matches else None

    def _bundle(self, scope: _Scope, base: str, bundle: Any) -> FhirResult:
        if not isinstance(bundle, dict) or bundle.get("type") not in ("transaction", "batch"):
            raise FhirError(422, "POST to the FHIR base takes a Bundle of type transaction or batch")
        entries = copy.deepcopy(bundle.get("entry") or [])
        if not isinstance(entries, list):
            raise FhirError(400, "Bundle.entry must be an array")
        for position, entry in enumerate(entries):
            _check_entry(position, entry, base)
        aliases: dict[str, str] = {}
        for position, entry in enumerate(entries):
            request = entry.get("request") or {}
            url = str(request.get("url", "")).removeprefix(base + "/")
            if str(request.get("method")).upper() == "POST" and "/" not in url and "?" not in url:
                rid = str(uuid.uuid4())
                condition = request.pop("ifNoneExist", None)
                existing = self._existing(scope, base, url, condition) if condition else None
                if existing is not None and existing.status != 200:
                    raise FhirError(existing.status, f"entry {position}: the ifNoneExist search failed")
                if existing is not None:  # a match: the entry reads it, and its fullUrl names it
                    rid = str((existing.body or {}).get("id"))
                    entry.pop("resource", None)
                    request.update({"method": "GET", "url": f"{url}/{rid}"})
                else:
                    request.update({"method": "PUT", "url": f"{url}/{rid}"})
                    entry["_assay_id"] = rid
                if isinstance(entry.get("fullUrl"), str):
                    aliases[entry["fullUrl"]] = f"{url}/{rid}"
        out = []
        for entry in entries:
            request = entry.get("request") or {}
            resource = entry.get("resource")
            rid = entry.pop("_assay_id", None)
            if isinstance(resource, dict):
                resource = rewrite_references(resource, aliases.get)
                own_id = resource.get("id") if isinstance(resource.get("id"), str) else None
                entry["resource"] = self._outbound(resource, scope, rid or own_id, base)
            url = str(request.get("url", ""))
            path, _, q = url.partition("?")
            path = "/".join(
                [path.split("/")[0], *(scope.out(p) for p in path.split("/")[1:2]), *path.split("/")[2:]]
            )
            if q or (request.get("method") == "GET" and "/" not in path):
                q = urlencode(self._search_params(path, parse_qsl(q, keep_blank_values=True), scope))
            request["url"] = path + (f"?{q}" if q else "")
            out.append(entry)
        return self._send("POST", "", scope, base, json={**bundle, "entry": out})


ExternalFhir = TaggedFhir
"""The name this class had before the isolated strategies (kept for imports)."""
