"""A playground's own space on an external FHIR server: opened at start, closed at teardown.

Each server isolates tenants its own way; `FhirSpaces` is the one seam over them:

- `open(playground_id)` creates the space and returns its `Space`: the FHIR base on the server,
  the headers each FHIR request needs, and what `resume`/`close` will need later (`saved`, JSON,
  kept in the playground's `fhir` sandbox row, so it survives a restart);
- `resume(playground_id, saved)` gives the `Space` again without creating anything (another worker,
  a restart, or a token that expired);
- `close(playground_id, saved)` deletes the space and everything in it.

`stateless` spaces derive everything from the playground id (`saved` is empty), so forwarding a
request never needs the database. Names on the server are `assay-<playground id>` so a space can be
traced back to its playground.

Failures of these management calls raise `ExternalFhirFailed`, naming the call and the status;
the server's URL and answer are in its `detail`, for the operator only.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

from assay.sandboxes.fhir.resources import ID_PATTERN
from assay.store.errors import DomainError

__all__ = [
    "AssayStores",
    "ExternalFhirFailed",
    "FhirSpaces",
    "GcpFhirStores",
    "HapiPartitions",
    "MedplumProjects",
    "Space",
    "answered_object",
    "server_failed",
    "space_name",
]

_FHIR_JSON = "application/fhir+json"

log = logging.getLogger("assay.sandboxes")


class ExternalFhirFailed(DomainError):
    """The external FHIR server failed a call Assay itself needed (open, load, capture, close).

    Not an agent's request: those come back as the server's own answer (or a 502 OperationOutcome).
    The service has no gateway code among the error codes of docs/api.md, so the envelope is `INTERNAL_ERROR`
    (500) with `message`; `status` says which HTTP status fits best should the mapping gain one.
    `message` names the call and the status but never the server's URL or its answer's text:
    `start` and `complete` answer it to the agent, who never sees the server. `detail` holds those
    for the operator; `str(exc)` (what the logs and a space's `close_error` keep) includes it.
    """

    status = 502

    def __init__(self, message: str, details: Mapping[str, Any] | None = None, *, detail: str = ""):
        super().__init__(message, details)
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.message} [{self.detail}]" if self.detail else self.message


def server_failed(
    what: str, method: str, url: str, answer: httpx.Response | httpx.HTTPError
) -> ExternalFhirFailed:
    """The error for a call to the server that raised or did not answer 2xx: `what` and the status
    (or the kind of network error) for everyone, the call, the URL and the answer in `detail`."""
    if isinstance(answer, httpx.HTTPError):
        message = f"the external FHIR server failed to {what}: no answer ({type(answer).__name__})"
        return ExternalFhirFailed(message, detail=f"{method} {url}: {answer}")
    body = answer.text[:300].replace("\n", " ")
    return ExternalFhirFailed(
        f"the external FHIR server failed to {what}: it answered {answer.status_code}",
        {"status": answer.status_code},
        detail=f"{method} {url} answered {answer.status_code}: {body}",
    )


@dataclass(frozen=True, slots=True)
class Space:
    """One playground's space on the server."""

    base_url: str
    """Its FHIR base on the server, without a trailing slash."""
    headers: dict[str, str] = field(default_factory=dict)
    """Sent with every FHIR request to the space (credentials)."""
    saved: dict[str, Any] = field(default_factory=dict)
    """What `resume` and `close` need beyond the playground id; JSON, kept in the sandbox row."""


class FhirSpaces(Protocol):
    """Creating, finding and deleting playground spaces on one server."""

    isolation: str
    """The `ASSAY_FHIR_ISOLATION` value that selects this implementation."""
    server_url: str
    stateless: bool
    """True when `resume` needs nothing but the playground id."""

    def open(self, playground_id: str) -> Space: ...

    def resume(self, playground_id: str, saved: Mapping[str, Any]) -> Space: ...

    def close(self, playground_id: str, saved: Mapping[str, Any]) -> None: ...


def space_name(playground_id: str) -> str:
    """The name of a playground's space on the server: `assay-<playground id>`."""
    return f"assay-{playground_id}"


def answered_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The JSON object the server answered; `ExternalFhirFailed` for anything else (a proxy's HTML
    page), so a caller's clean-up runs as for any failed call."""
    try:
        found = response.json()
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise ExternalFhirFailed(
            f"the external FHIR server failed to {what}: its answer is not a JSON object",
            detail=f"{response.request.method} {response.request.url}: {response.text[:300]}",
        )
    return found


def _auth(authorization: str | None) -> dict[str, str]:
    return {"Authorization": authorization} if authorization else {}


class _ServerSpaces:
    """What each `FhirSpaces` below starts from: the server, the HTTP client and Assay's own
    credentials (`ASSAY_FHIR_AUTHORIZATION`), and one way to make a management call."""

    def __init__(self, server_url: str, client: httpx.Client, authorization: str | None = None):
        self.server_url = server_url.rstrip("/")
        self.client = client
        self.headers = _auth(authorization)

    def _request(
        self, method: str, url: str, what: str, ok: tuple[int, ...] = (200, 201), **kwargs: Any
    ) -> httpx.Response:
        """`method url` (`kwargs` as httpx takes them), answered with a status in `ok`; anything else,
        a network error included, is `server_failed`'s `ExternalFhirFailed`."""
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise server_failed(what, method, url, exc) from None
        if response.status_code not in ok:
            raise server_failed(what, method, str(response.request.url), response)
        return response


def _parameters(*pairs: tuple[str, str, Any]) -> dict[str, Any]:
    """A FHIR `Parameters` resource from (name, value[x] key, value) triples."""
    return {
        "resourceType": "Parameters",
        "parameter": [{"name": name, kind: value} for name, kind, value in pairs],
    }


class AssayStores(_ServerSpaces):
    """A store per playground on an Assay FHIR server (`assay fhir-server`).

    `ASSAY_FHIR_URL` is the server's root (`http://host:8410`). Calls: `PUT /stores/{name}` (201, or
    200 when it exists), the FHIR base `/stores/{name}/fhir`, `DELETE /stores/{name}` (204; 404
    when already gone). Run against the real server in `tests/sandboxes/fhir/test_external_isolated.py`.
    """

    isolation = "assay-store"
    stateless = True

    def _store_url(self, playground_id: str) -> str:
        return f"{self.server_url}/stores/{space_name(playground_id)}"

    def open(self, playground_id: str) -> Space:
        self._request("PUT", self._store_url(playground_id), "create a store", headers=self.headers)
        return self.resume(playground_id, {})

    def resume(self, playground_id: str, saved: Mapping[str, Any]) -> Space:
        return Space(f"{self._store_url(playground_id)}/fhir", dict(self.headers))

    def close(self, playground_id: str, saved: Mapping[str, Any]) -> None:
        url = self._store_url(playground_id)
        self._request("DELETE", url, "delete a store", (200, 204, 404), headers=self.headers)


class HapiPartitions(_ServerSpaces):
    """A partition per playground on a HAPI FHIR JPA server with URL-based partitioning.

    `ASSAY_FHIR_URL` is the server's FHIR root without a tenant (`http://hapi:8080/fhir`); the
    server needs `partitioning.enabled` with the URL tenant mode (`[base]/{partition}/...`).
    Calls, per HAPI's "Partition Mapping Operations" page: `POST [base]/DEFAULT/$partition-
    management-create-partition` with `Parameters` `id` (integer) and `name` (code); the FHIR base
    `[base]/{name}`; `POST [base]/DEFAULT/$partition-management-delete-partition` with `id`. The
    partition id is derived from the playground id (31 bits of SHA-256), so nothing is stored; a
    collision makes the create fail loudly. Deleting a partition does not expunge its rows (HAPI's
    `$expunge` with `expungeEverything` is server-wide on some versions, so it is not sent).
    Written to HAPI's documentation only: NOT run against a HAPI server (none reachable here).
    """

    isolation = "hapi-partition"
    stateless = True

    def __init__(self, server_url: str, client: httpx.Client, authorization: str | None = None):
        super().__init__(server_url, client, authorization)
        self.headers = {**self.headers, "Content-Type": _FHIR_JSON, "Accept": _FHIR_JSON}

    @staticmethod
    def partition_id(playground_id: str) -> int:
        digest = hashlib.sha256(playground_id.encode()).digest()
        return int.from_bytes(digest[:4], "big") % (2**31 - 1) + 1

    def _operation(self, name: str, body: dict[str, Any], what: str) -> None:
        self._request("POST", f"{self.server_url}/DEFAULT/${name}", what, json=body, headers=self.headers)

    def open(self, playground_id: str) -> Space:
        body = _parameters(
            ("id", "valueInteger", self.partition_id(playground_id)),
            ("name", "valueCode", space_name(playground_id)),
            ("description", "valueString", f"Assay playground {playground_id}"),
        )
        self._operation("partition-management-create-partition", body, "create a partition")
        return self.resume(playground_id, {})

    def resume(self, playground_id: str, saved: Mapping[str, Any]) -> Space:
        headers = {k: v for k, v in self.headers.items() if k == "Authorization"}
        return Space(f"{self.server_url}/{space_name(playground_id)}", headers)

    def close(self, playground_id: str, saved: Mapping[str, Any]) -> None:
        body = _parameters(("id", "valueInteger", self.partition_id(playground_id)))
        self._operation("partition-management-delete-partition", body, "delete a partition")


class GcpFhirStores(_ServerSpaces):
    """A FHIR store per playground in a Google Cloud Healthcare API dataset.

    `ASSAY_FHIR_URL` is the dataset's REST name
    (`https://healthcare.googleapis.com/v1/projects/P/locations/L/datasets/D`) and
    `ASSAY_FHIR_AUTHORIZATION` a `Bearer` access token (e.g. `gcloud auth print-access-token`;
    such tokens expire after about an hour). Calls: `projects.locations.datasets.fhirStores.create`
    (`POST {dataset}/fhirStores?fhirStoreId={name}` with `version: R4`, `enableUpdateCreate: true`
    because seeding and creates PUT client ids, `disableReferentialIntegrity: true` because a batch
    loads resources in any order, as the embedded store does); the FHIR base
    `{dataset}/fhirStores/{name}/fhir`; `fhirStores.delete` (`DELETE {dataset}/fhirStores/{name}`).
    An existing store (409) is reused. Written to Google's REST reference only: NOT run against
    the Cloud Healthcare API (not reachable here).
    """

    isolation = "gcp-store"
    stateless = True

    def open(self, playground_id: str) -> Space:
        body = {"version": "R4", "enableUpdateCreate": True, "disableReferentialIntegrity": True}
        self._request(
            "POST", f"{self.server_url}/fhirStores", "create a FHIR store", (200, 201, 409),
            params={"fhirStoreId": space_name(playground_id)}, json=body, headers=self.headers,
        )  # fmt: skip
        return self.resume(playground_id, {})

    def resume(self, playground_id: str, saved: Mapping[str, Any]) -> Space:
        return Space(f"{self.server_url}/fhirStores/{space_name(playground_id)}/fhir", dict(self.headers))

    def close(self, playground_id: str, saved: Mapping[str, Any]) -> None:
        url = f"{self.server_url}/fhirStores/{space_name(playground_id)}"
        self._request("DELETE", url, "delete a FHIR store", (200, 204, 404), headers=self.headers)


class MedplumProjects(_ServerSpaces):
    """A Medplum project per playground, reached with a client application of that project.

    `ASSAY_FHIR_URL` is the FHIR base (`https://api.medplum.com/fhir/R4`) and
    `ASSAY_FHIR_AUTHORIZATION` the `Bearer` token of a super admin (it creates and expunges
    projects). Calls, per Medplum's docs: `POST [base]/Project/$init` (`Parameters` `name`) → the
    project; `POST /admin/projects/{project}/client` → a `ClientApplication` with its `secret`;
    `POST /oauth2/token` (`grant_type=client_credentials`) → an access token scoped to that project,
    used for every FHIR request (the base is shared: the token picks the project); `POST
    [base]/Project/{project}/$expunge?everything=true` at close. The project id and the client's
    id and secret are `saved` (in the `fhir` sandbox row, never shown to the agent); `resume` asks
    for a fresh token. Written to Medplum's documentation only: NOT run against a Medplum server.
    """

    isolation = "medplum-project"
    stateless = False

    def __init__(self, server_url: str, client: httpx.Client, authorization: str | None = None):
        super().__init__(server_url, client, authorization)
        parts = urlsplit(self.server_url)
        root = parts.path.removesuffix("/R4").removesuffix("/fhir")
        self.root_url = urlunsplit((parts.scheme, parts.netloc, root, "", "")).rstrip("/")

    def open(self, playground_id: str) -> Space:
        what = "create a project"
        body = _parameters(("name", "valueString", space_name(playground_id)))
        response = self._request(
            "POST", f"{self.server_url}/Project/$init", what,
            json=body, headers={**self.headers, "Content-Type": _FHIR_JSON},
        )  # fmt: skip
        project_id = answered_object(response, what).get("id")
        if not isinstance(project_id, str) or not ID_PATTERN.fullmatch(project_id):  # it goes into URLs
            raise ExternalFhirFailed(
                f"the external FHIR server failed to {what}: no Project id in its answer"
            )
        try:
            what = "create a client application"
            url = f"{self.root_url}/admin/projects/{project_id}/client"
            body = {"name": space_name(playground_id), "description": f"Assay playground {playground_id}"}
            found = answered_object(self._request("POST", url, what, json=body, headers=self.headers), what)
            saved = {
                "project_id": project_id,
                "client_id": found.get("id"),
                "client_secret": found.get("secret"),
            }
            return self.resume(playground_id, saved)
        except ExternalFhirFailed:
            try:
                self.close(playground_id, {"project_id": project_id})
            except ExternalFhirFailed as left:  # the first failure is the one to answer
                log.warning(
                    "project %s of playground %s left on the server: %s", project_id, playground_id, left
                )
            raise

    def resume(self, playground_id: str, saved: Mapping[str, Any]) -> Space:
        what = "issue a project token"
        form = {
            "grant_type": "client_credentials",
            "client_id": str(saved.get("client_id", "")),
            "client_secret": str(saved.get("client_secret", "")),
        }
        response = self._request("POST", f"{self.root_url}/oauth2/token", what, data=form)
        token = answered_object(response, what).get("access_token")
        if not isinstance(token, str) or not token:
            raise ExternalFhirFailed(f"the external FHIR server failed to {what}: no access_token")
        return Space(self.server_url, {"Authorization": f"Bearer {token}"}, dict(saved))

    def close(self, playground_id: str, saved: Mapping[str, Any]) -> None:
        what = "expunge a project"
        url = f"{self.server_url}/Project/{saved.get('project_id')}/$expunge"
        self._request(
            "POST", url, what, (200, 202, 204, 404), params={"everything": "true"},
            headers={**self.headers, "Content-Type": _FHIR_JSON},
        )  # fmt: skip
