"""`SandboxState`: the one read interface every check uses (docs/sandboxes.md, docs/snapshots.md).

A snapshot directory, the embedded live stores and the PostgreSQL stores all implement it, so a
check never knows where the state came from — the seam httpx has in `BaseTransport`.

Every sequence a method returns is in the store's recency order, oldest first (docs/snapshots.md):
HL7 and X12 by arrival sequence, portal rows by insertion, files by `uploaded_at` then path.
FHIR search returns resources in recency order too, unless `_sort` asks for another order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from assay.formats.fhir.store import SearchParams
from assay.formats.x12 import X12ParseError, parse_x12

__all__ = [
    "X12_INQUIRIES",
    "BaselineState",
    "FileRecord",
    "Hl7Record",
    "PortalRow",
    "SandboxState",
    "SearchParams",
    "VoiceTurn",
    "X12Record",
    "hl7_digests",
    "hl7_key",
    "portal_digests",
    "portal_key",
    "resource_digest",
    "x12_digests",
    "x12_key",
]


@dataclass(frozen=True, slots=True)
class Hl7Record:
    """One accepted outbound HL7v2 message (MLLP framing removed)."""

    seq: int
    message: str
    event_id: str | None = None
    received_at: str | None = None


@dataclass(frozen=True, slots=True)
class X12Record:
    """One clearinghouse exchange: the agent's request and the response it got."""

    seq: int
    response: str
    request: str | None = None
    record_id: str | None = None
    received_at: str | None = None


@dataclass(frozen=True, slots=True)
class PortalRow:
    """One row of a portal resource (`prior_auth_requests`, `patients`, …)."""

    seq: int
    resource: str
    row: Any
    portal: str | None = None


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One file in the playground's SFTP tree, with its metadata sidecar (docs/assertions.md)."""

    path: str
    """Relative to the SFTP root, `/`-separated, no leading slash."""
    size: int
    sha256: str
    content_type: str
    uploaded_at: str | None = None
    seeded: bool = False
    """True for files put there by datasets or scenarios that the agent never touched."""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def sidecar(self) -> dict[str, Any]:
        """The keys a `key` field of `sftp-file-present` reads."""
        return {
            **dict(self.metadata),
            "name": self.name,
            "path": self.path,
            "size": self.size,
            "content_type": self.content_type,
            "sha256": self.sha256,
            "uploaded_at": self.uploaded_at,
        }


@dataclass(frozen=True, slots=True)
class VoiceTurn:
    speaker: str
    text: str
    start_ms: int | None = None
    end_ms: int | None = None
    source: str | None = None
    """`line` (written by the sandbox's phone line), `reported` (posted to `voice/turns`), `seeded`
    (a dataset or scenario step); None for turns stored before sources were kept."""
    call_id: str | None = None
    """The phone-line call the turn belongs to (`source: line` only)."""
    kind: str = "speech"
    """`speech`, `dtmf` (the digits in `text`) or a line event: `hold`, `transfer`, `verified`,
    `refused`, `reference`, `hangup`."""


@runtime_checkable
class SandboxState(Protocol):
    """The final state of one playground, as the checks read it."""

    def input_entity(self) -> Mapping[str, Any] | None:
        """The task's input entity (docs/assertions.md), or None."""
        ...

    def entity(self, entity_id: str) -> Mapping[str, Any] | None:
        """A dataset entity's data by id, or None when unknown."""
        ...

    def fhir_search(self, resource_type: str, params: SearchParams) -> list[dict[str, Any]]:
        """Every resource `GET [base]/{resource_type}?{params}` returns, all pages.

        Raises `assay.formats.fhir.UnknownSearchParameter` for a parameter the type does not
        have (unsupported assertion) and `assay.formats.fhir.InvalidSearch` for a bad value.
        """
        ...

    def hl7_outbound(self) -> Sequence[Hl7Record]: ...

    def portal_rows(self, resource: str, portal: str | None = None) -> Sequence[PortalRow]:
        """Rows of `resource`; of one portal when `portal` is set, else of every portal."""
        ...

    def files(self) -> Sequence[FileRecord]: ...

    def read_file(self, path: str) -> bytes: ...

    def voice_turns(self) -> Sequence[VoiceTurn]: ...

    def x12_records(self) -> Sequence[X12Record]: ...


def resource_digest(resource: Mapping[str, Any]) -> str:
    """A FHIR resource's content digest, `meta` left out: a server rewrites `meta.versionId` and
    `meta.lastUpdated` on every write, and a change is a change of content (`no-unexpected-changes`)."""
    return _json_digest({key: value for key, value in resource.items() if key != "meta"})


def _json_digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hl7_key(position: int) -> str:
    """The `no-unexpected-changes` key of the `position`-th (from 1) outbound message: its place
    in arrival order, which the live store and a snapshot (renumbered from 1) agree on."""
    return f"outbound/{position}"


def hl7_digests(records: Sequence[Hl7Record]) -> dict[str, str]:
    """Digest by key of the outbound messages; every one was sent by the agent (the seeded inbox
    is not outbound), so the baseline of this surface is empty."""
    return {
        hl7_key(i): hashlib.sha256(record.message.encode("utf-8")).hexdigest()
        for i, record in enumerate(records, 1)
    }


X12_INQUIRIES = frozenset({"270", "276"})
"""Transaction sets that only ask (eligibility, claim status): like a FHIR read, they change nothing."""


def x12_key(position: int) -> str:
    """The `no-unexpected-changes` key of the `position`-th (from 1) exchange: its place in arrival
    order, which the live store and a snapshot (renumbered from 1) agree on."""
    return f"exchanges/{position}"


def x12_digests(records: Sequence[X12Record]) -> dict[str, str]:
    """Digest by key of the exchanges that write: requests holding a transaction set other than the
    270/276 inquiries (a 278 review request opens a case at the payer). Nothing is seeded (an x12
    dataset defines the payer), so the baseline is empty; a request that does not parse was refused
    (999/TA1) and changed nothing."""
    found = {}
    for i, record in enumerate(records, 1):
        try:
            codes = {t.code for t in parse_x12(record.request).transactions()} if record.request else set()
        except X12ParseError:
            continue
        if codes - X12_INQUIRIES:
            found[x12_key(i)] = hashlib.sha256(str(record.request).encode("utf-8")).hexdigest()
    return found


def portal_key(row: PortalRow) -> str:
    """`<resource>/<n>` (the default portal) or `<slug>/<resource>/<n>`: the row's place in its
    resource's insertion order, which an update keeps and rows are never removed from — the
    same numbering as `portal/[<slug>/]<resource>.json` in a snapshot."""
    where = f"{row.resource}/{row.seq}"
    return f"{row.portal}/{where}" if row.portal else where


def portal_digests(rows: Sequence[PortalRow]) -> dict[str, str]:
    return {portal_key(row): _json_digest(row.row) for row in rows}


@runtime_checkable
class BaselineState(Protocol):
    """A state that also knows what its playground was seeded with (`no-unexpected-changes`).

    Kept apart from `SandboxState` so a state without a recorded baseline (an older snapshot, a
    hand-made one) is still a `SandboxState`; the check then says `error`, never a silent fail.
    """

    def baseline(self, surface: str) -> Mapping[str, str] | None:
        """Digest by key (`Patient/p1`) of what was seeded on `surface`; None when not recorded."""
        ...

    def digests(self, surface: str) -> Mapping[str, str]:
        """Digest by key of the final state of `surface`."""
        ...
