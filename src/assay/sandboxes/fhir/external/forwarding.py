"""What the FHIR surface hands an external backend: one request, and the one interface both
isolation strategies (`tagged.py`, `isolated.py`) implement.

The surface (`sandboxes/fhir/routes.py`) builds a `ForwardedRequest` from the agent's HTTP request
and calls `FhirForwarder.forward`; it never needs to know how playgrounds are kept apart on the
server.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from assay.sandboxes.fhir.outcomes import FhirError

if TYPE_CHECKING:
    import httpx
    from sqlalchemy import Connection, Engine

    from assay.sandboxes.fhir.results import FhirResult

__all__ = [
    "FhirForwarder",
    "ForwardedRequest",
    "hidden",
    "hide_base",
    "is_under",
    "relative_under",
    "unanswered",
]

log = logging.getLogger("assay.sandboxes")


@dataclass(frozen=True, slots=True)
class ForwardedRequest:
    """One agent request to a playground's FHIR base, as the surface received it."""

    store_id: str
    """The playground whose FHIR state the request reads or writes."""
    base: str
    """The agent's FHIR base on Assay, absolute, without a trailing slash (URLs are mapped to it)."""
    method: str
    path: str
    """Relative to `base` (`""` for the base itself, `Patient/x`)."""
    query: tuple[tuple[str, str], ...] = ()
    """The query string's pairs, in order, repeats kept."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request's headers by lower-case name."""
    body: bytes = b""

    @property
    def parts(self) -> list[str]:
        """The non-empty segments of `path` (`[]` for the base)."""
        return [part for part in self.path.strip("/").split("/") if part]


class FhirForwarder(Protocol):
    """An external FHIR server behind the surface (`TaggedFhir`, `IsolatedFhir`)."""

    base_url: str
    """The server's URL (`ASSAY_FHIR_URL`), recorded in a capture's pointer."""
    client: httpx.Client

    def forward(self, request: ForwardedRequest, *, engine: Engine | None = None) -> FhirResult:
        """The server's answer to `request`, mapped back to the agent's base; a `FhirError` for
        what is refused before anything is sent. `engine` finds a playground's recorded space."""
        ...

    def snapshot(self, store_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every resource of the playground on the server (for the capture, docs/snapshots.md)."""
        ...


def unanswered(server_url: str, problem: httpx.HTTPError | str) -> FhirError:
    """The 502 OperationOutcome an agent's request gets when the server could not be asked (a
    network error, a space that cannot be resumed). The agent never sees the server, so its URL
    and the cause go to the log only."""
    log.warning("forwarding to the external FHIR server at %s failed: %s", server_url, problem)
    kind = type(problem).__name__ if not isinstance(problem, str) else "no space"
    return FhirError(502, f"the external FHIR server could not be asked ({kind})")


def is_under(url: str, base: str) -> bool:
    """Whether `url` is `base` or below it (`http://h/fhir-binary/x` is not below `http://h/fhir`)."""
    return url == base or url.startswith((base + "/", base + "?"))


@functools.lru_cache(maxsize=256)
def _base_in_text(base: str) -> re.Pattern[str]:
    """`base` where it ends a URL's path segment: followed by `/`, `?`, `#`, a quote, a space, a
    full stop, the end — not by a letter, digit, `-` or `_` (`http://h/fhir-binary` is another
    path on the server, not under `http://h/fhir`, as `is_under` decides for whole URLs)."""
    return re.compile(re.escape(base) + r"(?![A-Za-z0-9_\-])")


def hidden(text: str, old: str, new: str) -> str:
    """`text` with the base `old` replaced by `new` wherever it occurs (`_base_in_text`)."""
    return _base_in_text(old).sub(lambda _: new, text) if old in text else text


def hide_base(value: Any, old: str, new: str) -> Any:
    """`value` (decoded JSON) with the base `old` replaced by `new` in every string, in place;
    returns it.

    Why every string and not only the URL-valued elements: a server writes its own base into
    free text too — OperationOutcome `diagnostics`, `issue.details.text`, narratives,
    `Bundle.link`, `Binary` URLs, extensions — and an agent must never see the server, its host
    or its space's path (`/stores/assay-<playground>/fhir`, a HAPI partition, a GCP dataset).
    `old` without a trailing slash covers the base with one. Done on decoded values, not on the
    response's bytes: JSON may write `/` as `\\/` (or any character as `\\uXXXX`), which a byte
    replacement would miss; in place, the walk costs a ninth of the keyed copy it replaces (a
    1,000-entry search page: docs/decisions/fhir-external.md). Object keys are element names, never URLs.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                if old in item:
                    value[key] = hidden(item, old, new)
            elif isinstance(item, dict | list):
                hide_base(item, old, new)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                if old in item:
                    value[index] = hidden(item, old, new)
            elif isinstance(item, dict | list):
                hide_base(item, old, new)
    return value


def relative_under(base: str) -> Callable[[str], str | None]:
    """A `rewrite_references` mapping: an absolute reference under `base` (some servers write
    `http://<server>/fhir/Patient/1`) as the relative `Patient/1` the embedded store and every
    criterion use (docs/sandboxes.md, docs/snapshots.md); None for any other reference (left as written)."""
    prefix = base + "/"

    def mapped(reference: str) -> str | None:
        if reference.startswith(prefix) and len(reference) > len(prefix):
            return reference[len(prefix) :]
        return None

    return mapped
