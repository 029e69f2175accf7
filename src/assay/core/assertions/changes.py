"""`no-unexpected-changes`: the agent's writes compared with the seeded baseline.

An allow entry names what the agent may change; the key it carries says which surface it is for:

- `{resourceType, change?, search?}` — FHIR: the changed resource must be among the final state's
  search results (a deleted resource can only be allowed without `search`, it is no longer there);
- `{path, change?}` — files: a glob over the SFTP tree's relative paths;
- `{message_type, where?}` — HL7: an outbound message whose MSH-9 is `ADT^A08` (or whose MSH-9.1
  is `ADT` when no trigger is given) and whose `where` paths (HL7 paths or the `hl7-structural`
  aliases) hold the values given;
- `{resource, portal?, change?, where?}` — portal: a row of that resource (of that portal) whose
  dotted `where` paths hold the values given (read from the final row);
- `{transaction_set, member_id?}` — X12: an exchange the agent posted whose request is that
  transaction set (ST01 `270`, `276`, `278`) and, when given, about that member only.

Voice is not a surface of this check: a call writes no record (what the agent said is judged by
`voice-transcript`). `surfaces: [voice]` is refused at create, and judged `error` with that reason
when a stored or offline criterion asks for it.

Every entry may say `max`: how many changes it covers at most (a duplicate order is one too many).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    JsonValue,
    PositiveInt,
    Tag,
    ValidationInfo,
    field_validator,
)

from assay.core.assertions._base import AT_VERIFY, StrictModel, TaggedAssertion
from assay.core.assertions.fhir import known_resource_type, search_as_text
from assay.core.assertions.hl7 import CORRELATION_ALIASES
from assay.core.state import X12_INQUIRIES
from assay.core.surfaces import known_surface
from assay.formats.hl7 import Hl7Path

__all__ = [
    "ALLOW_TAGS",
    "UNJUDGED_SURFACES",
    "AllowExchange",
    "AllowMessage",
    "AllowPath",
    "AllowResource",
    "AllowRow",
    "NoUnexpectedChanges",
]

_MESSAGE_TYPE = re.compile(r"[A-Z0-9]{3}(\^[A-Z0-9]{3})?")

Change = Literal["created", "updated", "deleted"]
Surface = Annotated[str, AfterValidator(known_surface)]
"""A surface's name (`core.surfaces`: the registry's names)."""
UNJUDGED_SURFACES = {
    "voice": "a call changes no record: every turn the agent speaks is speech, not a write, so there "
    "is nothing to compare with a seeded baseline; judge what the agent said with voice-transcript "
    "(not_contains for a 'never said X' rule)",
}
"""Surfaces a task may have that this check does not compare, with the reason it gives."""


class _Allow(StrictModel):
    max: PositiveInt | None = None
    """How many changes this entry covers at most; the rest go on to later entries."""


class AllowResource(_Allow):
    resource_type: str = Field(alias="resourceType")
    change: Change | None = None
    search: dict[str, str | list[str]] | None = None

    _known_type = field_validator("resource_type")(classmethod(lambda cls, value: known_resource_type(value)))
    _scalars_as_text = field_validator("search", mode="before")(
        classmethod(lambda cls, value: search_as_text(value))
    )


class AllowPath(_Allow):
    path: str = Field(min_length=1)
    """A glob over the SFTP tree's relative paths (`outbound/*.pdf`)."""
    change: Change | None = None


class AllowMessage(_Allow):
    message_type: str
    """`ADT^A08` (MSH-9.1^MSH-9.2), or `ADT` for any trigger event."""
    where: dict[str, str] = Field(default_factory=dict)
    """HL7 paths (`PID.3.1`) or aliases (`trigger_event`, `control_id`) → the value they hold."""

    @field_validator("message_type")
    @classmethod
    def _type_and_trigger(cls, value: str) -> str:
        if not _MESSAGE_TYPE.fullmatch(value):
            raise ValueError(f"{value!r} is not a message type: `ADT^A08` (MSH-9.1^MSH-9.2) or `ADT`")
        return value

    @field_validator("where")
    @classmethod
    def _keys_are_paths_or_aliases(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key in CORRELATION_ALIASES:
                continue
            try:
                Hl7Path.parse(key)
            except ValueError as exc:
                reason = getattr(exc, "reason", str(exc))
                aliases = ", ".join(CORRELATION_ALIASES)
                raise ValueError(
                    f"where key {key!r} is neither an alias ({aliases}) nor an HL7 path: {reason}"
                ) from None
        return value


class AllowRow(_Allow):
    resource: str = Field(pattern=r"^[^/\\\x00]+$", max_length=128)
    """A portal resource (`prior_auth_requests`)."""
    portal: str | None = Field(default=None, pattern=r"^[^/\\\x00]+$", max_length=128)
    """A portal slug; None: the resource of any portal."""
    change: Change | None = None
    where: dict[str, JsonValue] = Field(default_factory=dict)
    """Dotted paths into the final row (`member_id`, `decision.status`) → the value they hold."""

    @field_validator("where")
    @classmethod
    def _paths_are_dotted(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for path in value:
            if not path or "" in path.split("."):
                raise ValueError(f"where key {path!r} is not a dotted path (`member_id`, `decision.status`)")
        return value


class AllowExchange(_Allow):
    transaction_set: str = Field(pattern=r"^[0-9]{3}$")
    """The request's ST01, a transaction set that writes: `278` (a review request)."""
    member_id: str | None = Field(default=None, min_length=1, max_length=80)
    """Every subscriber the request names (NM1*IL NM109) is this member."""

    @field_validator("transaction_set")
    @classmethod
    def _writes(cls, value: str) -> str:
        if value in X12_INQUIRIES:
            raise ValueError(f"{value} is an inquiry: it changes nothing, so it needs no allow entry")
        return value


ALLOW_TAGS = {
    "resourceType": "fhir",
    "path": "files",
    "message_type": "hl7",
    "resource": "portal",
    "transaction_set": "x12",
}
"""The key that makes an allow entry one surface's; the tag is its surface."""


def _allow_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        found = [tag for key, tag in ALLOW_TAGS.items() if key in value]
        return found[0] if len(found) == 1 else None
    if isinstance(value, StrictModel):
        return {
            AllowResource: "fhir",
            AllowPath: "files",
            AllowMessage: "hl7",
            AllowRow: "portal",
            AllowExchange: "x12",
        }.get(type(value))
    return None


Allow = Annotated[
    Annotated[AllowResource, Tag("fhir")]
    | Annotated[AllowPath, Tag("files")]
    | Annotated[AllowMessage, Tag("hl7")]
    | Annotated[AllowRow, Tag("portal")]
    | Annotated[AllowExchange, Tag("x12")],
    Discriminator(
        _allow_tag,
        custom_error_type="allow_entry",
        custom_error_message=(
            "an allow entry has exactly one of resourceType (FHIR), path (files), "
            "message_type (HL7), resource (portal) and transaction_set (X12)"
        ),
    ),
]


class NoUnexpectedChanges(TaggedAssertion):
    assert_: Literal["no-unexpected-changes"] = Field(alias="assert")
    surfaces: list[Surface] | None = None
    """Surfaces compared; None means every surface the state has a baseline for."""
    allow: list[Allow] = Field(default_factory=list)
    start_ms: int | None = None
    end_ms: int | None = None

    @field_validator("surfaces")
    @classmethod
    def _judged_surfaces(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        """At create a surface the check does not compare is refused with the reason; a stored or
        offline criterion keeps it, and the check answers `error` with the same reason."""
        if value is None or (info.context or {}).get(AT_VERIFY):
            return value
        for name in value:
            if name in UNJUDGED_SURFACES:
                raise ValueError(
                    f"{name} is not compared by no-unexpected-changes: {UNJUDGED_SURFACES[name]}"
                )
        return value
