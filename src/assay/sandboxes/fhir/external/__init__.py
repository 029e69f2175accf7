"""An external FHIR R4 server behind the sandbox surface (`ASSAY_FHIR_URL`, docs/deployment.md).

The agent keeps talking to its task run's Assay FHIR base; each interaction is forwarded to the
server, and `complete` copies the playground's final state back into an embedded layer (docs/snapshots.md).
How playgrounds are kept apart on the server is chosen with `ASSAY_FHIR_ISOLATION`:

| value | playground space | `ASSAY_FHIR_URL` | verified against |
|---|---|---|---|
| `tag` (default) | shared server, tag + id prefix (`tagged.py`) | any FHIR R4 base | an Assay FHIR server |
| `assay-store` | a store (`assay fhir-server`) | the server's root | an Assay FHIR server |
| `hapi-partition` | a HAPI partition | the FHIR root, no tenant | documentation only |
| `gcp-store` | a Cloud Healthcare FHIR store | the dataset's REST name | documentation only |
| `medplum-project` | a Medplum project | the FHIR base (`…/fhir/R4`) | documentation only |

`ASSAY_FHIR_AUTHORIZATION` is an `Authorization` header value Assay sends to the server with its
own calls (space management, seeding, capture) and with forwarded requests — except on Medplum,
where forwarded requests carry the playground project's own token. It is never shown to agents.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from assay.sandboxes.fhir.external._seeding import SEED_HEADER
from assay.sandboxes.fhir.external.forwarding import FhirForwarder, ForwardedRequest
from assay.sandboxes.fhir.external.isolated import SPACE_KEY, IsolatedFhir, recorded_space
from assay.sandboxes.fhir.external.spaces import (
    AssayStores,
    ExternalFhirFailed,
    FhirSpaces,
    GcpFhirStores,
    HapiPartitions,
    MedplumProjects,
    Space,
)
from assay.sandboxes.fhir.external.tagged import TAG_SYSTEM, ExternalFhir, TaggedFhir

__all__ = [
    "ISOLATIONS",
    "SEED_HEADER",
    "SPACE_KEY",
    "TAG_SYSTEM",
    "AssayStores",
    "ExternalBackend",
    "ExternalFhir",
    "ExternalFhirFailed",
    "ExternalFhirSettings",
    "FhirForwarder",
    "FhirSpaces",
    "ForwardedRequest",
    "GcpFhirStores",
    "HapiPartitions",
    "IsolatedFhir",
    "MedplumProjects",
    "Space",
    "TaggedFhir",
    "open_external_fhir",
    "recorded_space",
]

ExternalBackend = TaggedFhir | IsolatedFhir
"""The configured strategy: seeding and teardown tell the two apart; the FHIR surface sees only
the `FhirForwarder` interface both implement."""

_SPACES: dict[str, type[AssayStores | HapiPartitions | GcpFhirStores | MedplumProjects]] = {
    "assay-store": AssayStores,
    "hapi-partition": HapiPartitions,
    "gcp-store": GcpFhirStores,
    "medplum-project": MedplumProjects,
}
ISOLATIONS = ("tag", *_SPACES)
"""The values `ASSAY_FHIR_ISOLATION` takes."""


@dataclass(frozen=True, slots=True)
class ExternalFhirSettings:
    """`ASSAY_FHIR_URL`, `ASSAY_FHIR_ISOLATION`, `ASSAY_FHIR_AUTHORIZATION`, as the FHIR surface's
    settings section (`FhirSandbox.options`) gives them."""

    url: str
    isolation: str
    authorization: str | None


def open_external_fhir(settings: ExternalFhirSettings) -> ExternalBackend:
    """The forwarder for `settings`' server, with its own pooled HTTP client; whoever opens it
    (the app's lifespan, through the FHIR surface's `open`) closes `.client` at shutdown."""
    headers = {"Accept": "application/fhir+json"}
    if settings.isolation == "tag":
        if settings.authorization:
            headers["Authorization"] = settings.authorization
        return TaggedFhir(settings.url, httpx.Client(timeout=60, headers=headers))
    client = httpx.Client(timeout=60, headers=headers)
    return IsolatedFhir(_SPACES[settings.isolation](settings.url, client, settings.authorization), client)
