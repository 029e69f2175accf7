"""Forwarding to a playground that has its own space on the external server.

With a store, partition or project per playground (`spaces.py`), nothing needs rewriting: ids are
kept, no tag is added, and every interaction the embedded surface serves is forwarded — conditional
update and delete and type/system `_history` included, which the tag strategy must refuse because
there they would reach other playgrounds. Only URLs are mapped: the agent's absolute URLs from its
Assay base to the space's base on the way out (`fullUrl`, `url`, `location`, `reference`), and on
the way in the space's base is replaced by the Assay base in every string of the answer and in
its `Location` and `Content-Location` headers (`hide_base`: diagnostics, narratives and links
quote it too), so an agent never sees the server. The capture makes references under the space's
base relative (`Type/id`), as the embedded store keeps them.

The surface forwards only the URL shapes of the embedded REST API: R4 resource types, FHIR ids, no
`$operation` (an agent must not reach `$partition-management-*`, `Project/$init` or `$expunge`
with Assay's own credentials), in request URLs and in transaction/batch entries alike. One shape
more: a GET on the base with a query, because HAPI pages every search with `next` links there
(`[base]?_getpages=<id>&_getpagesoffset=…`); a system-level search takes the same route.

Where a playground's space is remembered: stateless spaces (Assay stores, HAPI partitions, GCP
stores) are derived from the playground id; a Medplum project's ids and client are `saved` in the
playground's `fhir` sandbox row (`credentials["external_fhir"]`, never shown to the agent), so a
restarted or second worker finds it. Both are cached per process.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import httpx
from sqlalchemy import Connection, Engine, select

from assay.sandboxes.fhir.actions import parse_json
from assay.sandboxes.fhir.bundles import parse_entry
from assay.sandboxes.fhir.external import forwarding
from assay.sandboxes.fhir.external._reading import read_everything
from assay.sandboxes.fhir.external._seeding import put_in_batches
from assay.sandboxes.fhir.external.forwarding import ForwardedRequest, is_under, unanswered
from assay.sandboxes.fhir.external.spaces import ExternalFhirFailed, FhirSpaces, Space
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.resources import check_type, rewrite_references
from assay.sandboxes.fhir.results import FhirResult
from assay.store.models import Sandbox

__all__ = ["SPACE_KEY", "IsolatedFhir", "recorded_space"]

SPACE_KEY = "external_fhir"
"""The key of a playground's space in its `fhir` sandbox row's `credentials` JSON."""

_ID = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9\-.]{1,64}$")
"""A FHIR id that is no dot segment: `.` and `..` match FHIR's pattern, but in a URL to the server
they are resolved away (`DELETE Patient/.` is `DELETE Patient`, a conditional delete)."""
_URL_KEYS = frozenset({"fullUrl", "url", "location", "reference"})
_REQUEST_HEADERS = (
    "content-type",
    "if-match",
    "if-none-exist",
    "if-none-match",
    "if-modified-since",
    "prefer",
)
_RESPONSE_HEADERS = ("ETag", "Last-Modified")
_URL_HEADERS = ("Location", "Content-Location")
_CACHE = 1024
"""Spaces cached per process (LRU): a Medplum space costs a token request to resume."""


def recorded_space(conn: Connection, playground_id: str) -> dict[str, Any] | None:
    """What `seed` recorded about the playground's space, or None (no external space)."""
    credentials = conn.execute(
        select(Sandbox.credentials).where(Sandbox.playground_id == playground_id, Sandbox.type == "fhir")
    ).scalar()
    found = credentials.get(SPACE_KEY) if isinstance(credentials, dict) else None
    return found if isinstance(found, dict) else None


def _rebase(value: Any, old: str, new: str) -> Any:
    """`value` with every URL under `old` (in `fullUrl`, `url`, `location`, `reference`) under `new`:
    an agent's body on its way to the space (answers coming back go through `hide_base`)."""
    if isinstance(value, list):
        return [_rebase(item, old, new) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in _URL_KEYS and isinstance(item, str):
            out[key] = _rebase_url(item, old, new)
        else:
            out[key] = _rebase(item, old, new) if isinstance(item, dict | list) else item
    return out


def _rebase_url(url: str, old: str, new: str) -> str:
    if is_under(url, old):
        return new + url[len(old) :]
    return url


def _route(method: str, parts: Sequence[str], query: bool = False) -> None:
    """404 unless (method, path) is an interaction of the embedded REST surface (docs/sandboxes.md), or a
    GET with a `query` on the base: a paging link there (HAPI's `[base]?_getpages=…`) or a
    system-level search, which the space keeps to the playground as it keeps every search."""
    allowed = False
    if not parts:
        allowed = method == "POST" or (method == "GET" and query)
    elif parts[0] in ("metadata", "_history"):
        allowed = method == "GET" and len(parts) == 1
    else:
        check_type(parts[0])
        rest = list(parts[1:])
        if not rest:
            allowed = method in ("GET", "POST", "PUT", "DELETE")
        elif rest == ["_search"]:
            allowed = method == "POST"
        elif rest == ["_history"]:
            allowed = method == "GET"
        elif _ID.match(rest[0]):
            tail = rest[1:]
            allowed = (not tail and method in ("GET", "PUT", "PATCH", "DELETE")) or (
                method == "GET"
                and tail[:1] == ["_history"]
                and len(tail) <= 2
                and all(map(_ID.match, tail[1:]))
            )
    if not allowed:
        path = "/".join(parts)
        raise FhirError(404, f"{method} {path or '[base]'} is not a FHIR interaction this server supports")


def _bundle_out(bundle: Any, base: str) -> dict[str, Any]:
    """A transaction/batch bundle checked entry by entry as the embedded surface checks it (400 /
    404), each entry's URL made relative and limited to the surface's interactions."""
    if not isinstance(bundle, dict) or bundle.get("type") not in ("transaction", "batch"):
        raise FhirError(422, "POST to the FHIR base takes a Bundle of type transaction or batch")
    entries = bundle.get("entry") or []
    if not isinstance(entries, list):
        raise FhirError(400, "Bundle.entry must be an array")
    out = []
    for position, entry in enumerate(entries):
        parsed = parse_entry(position, entry, base)
        url = str(entry["request"]["url"]).removeprefix(base + "/")
        _route(parsed.method, [p for p in url.partition("?")[0].split("/") if p])
        out.append({**entry, "request": {**entry["request"], "url": url}})
    return {**bundle, "entry": out}


class IsolatedFhir:
    """Forwarding to playground spaces on one external server (`FhirSpaces` creates them)."""

    def __init__(self, spaces: FhirSpaces, client: httpx.Client):
        self.spaces = spaces
        self.client = client
        self.base_url = spaces.server_url
        self._cache: OrderedDict[str, Space] = OrderedDict()
        self._lock = threading.Lock()

    # -- spaces --------------------------------------------------------------------------------

    def open(self, playground_id: str) -> Space:
        space = self.spaces.open(playground_id)
        self._remember(playground_id, space)
        return space

    def record(self, space: Space) -> dict[str, Any]:
        """The JSON kept in the sandbox row for `space` (`SPACE_KEY`)."""
        return {"isolation": self.spaces.isolation, "server": self.base_url, "saved": space.saved}

    def close(self, playground_id: str, recorded: Mapping[str, Any] | None) -> None:
        with self._lock:
            self._cache.pop(playground_id, None)
        saved = (recorded or {}).get("saved")
        self.spaces.close(playground_id, saved if isinstance(saved, dict) else {})

    def space(
        self, playground_id: str, conn: Connection | None = None, engine: Engine | None = None
    ) -> Space:
        """The playground's space: cached, derived from its id, or resumed from the sandbox row."""
        with self._lock:
            found = self._cache.get(playground_id)
            if found is not None:
                self._cache.move_to_end(playground_id)  # least recently used goes first
                return found
        saved: dict[str, Any] = {}
        if not self.spaces.stateless:
            recorded = None
            if conn is not None:
                recorded = recorded_space(conn, playground_id)
            elif engine is not None:
                with engine.connect() as own:
                    recorded = recorded_space(own, playground_id)
            if recorded is None or not isinstance(recorded.get("saved"), dict):
                raise ExternalFhirFailed(
                    f"playground {playground_id} has no space on the external FHIR server"
                )
            saved = recorded["saved"]
        space = self.spaces.resume(playground_id, saved)
        self._remember(playground_id, space)
        return space

    def _remember(self, playground_id: str, space: Space) -> None:
        with self._lock:
            self._cache[playground_id] = space
            while len(self._cache) > _CACHE:
                self._cache.popitem(last=False)

    def _refresh(self, playground_id: str, space: Space) -> Space:
        """A space whose credentials the server refused (an expired token): resumed once more."""
        with self._lock:
            self._cache.pop(playground_id, None)
        fresh = self.spaces.resume(playground_id, space.saved)
        self._remember(playground_id, fresh)
        return fresh

    # -- seeding and capture -------------------------------------------------------------------

    def load(self, space: Space, resources: Sequence[dict[str, Any]]) -> None:
        """Write seeded resources (loaded per docs/sandboxes.md) into the space, ids kept, `versionId` and
        `lastUpdated` left to the server."""
        stripped = []
        for resource in resources:
            body = dict(resource)
            meta = {
                k: v
                for k, v in (body.pop("meta", None) or {}).items()
                if k not in ("versionId", "lastUpdated")
            }
            stripped.append({**body, "meta": meta} if meta else body)
        put_in_batches(self.client, space.base_url, self._headers(space), stripped)

    def snapshot(self, playground_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every resource in the playground's space (for the capture); raises on any failed read.
        An absolute reference under the space's base (what some servers write, and what an
        agent's absolute reference under its Assay base became on the way out) is captured as
        the relative `Type/id` the embedded store and every criterion search use."""
        with self._lock:
            cached = self._cache.get(playground_id)
        if cached is not None and not self.spaces.stateless:  # its token may have expired since
            space = self._refresh(playground_id, cached)
        else:  # derived, or resumed from the sandbox row with a fresh token
            space = self.space(playground_id, conn)
        found = read_everything(self.client, space.base_url, self._headers(space))
        relative = forwarding.relative_under(space.base_url)
        return [rewrite_references(resource, relative) for resource in found]

    # -- the interactions ----------------------------------------------------------------------

    @staticmethod
    def _headers(space: Space, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Headers of one request to the space, by lower-case name (so the agent's `content-type`
        replaces the default instead of being sent beside it)."""
        merged = {"accept": "application/fhir+json", "content-type": "application/fhir+json"}
        for headers in (space.headers, extra or {}):
            merged.update({name.lower(): value for name, value in headers.items()})
        return merged

    def forward(self, request: ForwardedRequest, *, engine: Engine | None = None) -> FhirResult:
        """One REST interaction on playground `request.store_id`'s space."""
        method, raw, base, parts = request.method, request.body, request.base, request.parts
        _route(method, parts, bool(request.query))
        body: Any = None
        if raw and method in ("POST", "PUT", "PATCH") and parts[-1:] != ["_search"]:
            body = parse_json(raw)  # 400 before anything reaches the server
            if not parts:
                body = _bundle_out(body, base)
        try:
            space = self.space(request.store_id, engine=engine)
        except ExternalFhirFailed as exc:
            raise unanswered(self.base_url, str(exc)) from None
        content = raw if body is None else json.dumps(_rebase(body, base, space.base_url)).encode()
        sent = {k: v for k, v in request.headers.items() if k in _REQUEST_HEADERS}
        response = self._send(request.store_id, space, method, parts, list(request.query), sent, content)
        return self._inbound(response, space, base)

    def _send(
        self, store_id: str, space: Space, method: str, parts: list[str],
        query: list[tuple[str, str]], headers: dict[str, str], content: bytes,
    ) -> httpx.Response:  # fmt: skip
        """Send once; a 401 from a space with expiring credentials (Medplum) is resumed and resent."""
        for attempt in (1, 2):
            url = "/".join([space.base_url, *parts]) + (f"?{urlencode(query)}" if query else "")
            try:
                response = self.client.request(
                    method, url, content=content or None,
                    headers=self._headers(space, headers),
                )  # fmt: skip
            except httpx.HTTPError as exc:
                raise unanswered(self.base_url, exc) from None
            if response.status_code != 401 or self.spaces.stateless or attempt == 2:
                break
            try:
                space = self._refresh(store_id, space)
            except ExternalFhirFailed:
                break
        return response

    def _inbound(self, response: httpx.Response, space: Space, base: str) -> FhirResult:
        """The server's answer as the agent sees it: the space's base replaced by `base` in every
        string of the body (`hide_base`: URL-valued elements, free text, links) and in the
        `Location` and `Content-Location` headers, so the server never shows through."""
        body = None
        if response.content:
            try:
                body = forwarding.hide_base(response.json(), space.base_url, base)
            except ValueError:
                raise FhirError(
                    502, f"the external FHIR server answered {response.status_code} without JSON"
                ) from None
        out = {k: response.headers[k] for k in _RESPONSE_HEADERS if k in response.headers}
        for name in _URL_HEADERS:
            if name in response.headers:
                out[name] = forwarding.hidden(response.headers[name], space.base_url, base)
        return FhirResult(response.status_code, body, out)
