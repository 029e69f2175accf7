"""The typed assertions: a discriminated union on `assert` (docs/assertions.md).

`parse_assertion` is the one way in: it picks the model by `assert` and reports every problem as
`AssertionInvalid` keyed by dotted path (`fields.0.operator`), never a bare pydantic error.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from assay.core.assertions._base import AT_VERIFY, FieldAssertion, MatchMode, TaggedAssertion
from assay.core.assertions.changes import (
    ALLOW_TAGS,
    UNJUDGED_SURFACES,
    AllowExchange,
    AllowMessage,
    AllowPath,
    AllowResource,
    AllowRow,
    NoUnexpectedChanges,
)
from assay.core.assertions.fhir import FhirField, FhirResourceState
from assay.core.assertions.hl7 import Hl7Field, Hl7Structural
from assay.core.assertions.natural_language import NaturalLanguage
from assay.core.assertions.portal import PortalAssertion, PortalCorrelation, PortalStateMatch
from assay.core.assertions.sftp import SftpField, SftpFilePresent
from assay.core.assertions.voice import ReferenceTarget, VoiceCall, VoiceTranscript
from assay.core.assertions.x12 import X12Field, X12Response
from assay.core.errors import AssertionInvalid

__all__ = [
    "ASSERTION_MODELS",
    "UNJUDGED_SURFACES",
    "AllowExchange",
    "AllowMessage",
    "AllowPath",
    "AllowResource",
    "AllowRow",
    "AssertionModel",
    "FhirField",
    "FhirResourceState",
    "FieldAssertion",
    "Hl7Field",
    "Hl7Structural",
    "MatchMode",
    "NaturalLanguage",
    "NoUnexpectedChanges",
    "PortalAssertion",
    "PortalCorrelation",
    "PortalStateMatch",
    "ReferenceTarget",
    "SftpField",
    "SftpFilePresent",
    "TaggedAssertion",
    "VoiceCall",
    "VoiceTranscript",
    "X12Field",
    "X12Response",
    "parse_assertion",
]

ASSERTION_MODELS: dict[str, type[TaggedAssertion]] = {
    "fhir-resource-state": FhirResourceState,
    "hl7-structural": Hl7Structural,
    "natural-language": NaturalLanguage,
    "no-unexpected-changes": NoUnexpectedChanges,
    "portal-state-match": PortalStateMatch,
    "sftp-file-present": SftpFilePresent,
    "voice-call": VoiceCall,
    "voice-transcript": VoiceTranscript,
    "x12-response": X12Response,
}

AssertionModel = (
    FhirResourceState
    | Hl7Structural
    | NaturalLanguage
    | NoUnexpectedChanges
    | PortalStateMatch
    | SftpFilePresent
    | VoiceCall
    | VoiceTranscript
    | X12Response
)
"""What `parse_assertion` returns; each member's `assert_` Literal is its tag in `ASSERTION_MODELS`."""


def parse_assertion(data: Any, *, at_verify: bool = False) -> AssertionModel:
    """Validate an assertion object; raise `AssertionInvalid` naming each offending key.

    `at_verify=True` is for judging a stored assertion: an invalid `matches` pattern then parses
    and fails its field at verify time (docs/assertions.md), instead of rejecting the whole criterion.
    """
    if not isinstance(data, dict):
        raise AssertionInvalid({"": [f"an assertion must be a JSON object, not {_kind(data)}"]})
    tag = data.get("assert")
    if tag is None:
        raise AssertionInvalid({"assert": ["missing required key `assert`"]})
    model = ASSERTION_MODELS.get(tag) if isinstance(tag, str) else None
    if model is None:
        known = ", ".join(ASSERTION_MODELS)
        raise AssertionInvalid({"assert": [f"unknown assertion type {tag!r}; expected one of {known}"]})
    try:
        return model.model_validate(data, context={AT_VERIFY: at_verify})  # type: ignore[return-value]
    except ValidationError as exc:
        raise AssertionInvalid(_errors_by_key(exc)) from None


_EXPECTED_ERRORS = frozenset({"list_expected", "invalid_pattern"})


def _errors_by_key(exc: ValidationError) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        loc = _without_union_tags([str(part) for part in error["loc"]])
        if error["type"] in _EXPECTED_ERRORS:
            loc.append("expected")
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}"
        elif error["type"] == "missing":
            message = f"missing required key {loc[-1]!r}"
        errors.setdefault(".".join(loc), []).append(message.removeprefix("Value error, "))
    return errors


_TAGS = frozenset(ALLOW_TAGS.values())


def _without_union_tags(loc: list[str]) -> list[str]:
    """Drop the tag pydantic puts after `allow.<i>` (`allow.0.hl7.where`): it names no key."""
    return [
        part
        for i, part in enumerate(loc)
        if not (part in _TAGS and i >= 2 and loc[i - 2] == "allow" and loc[i - 1].isdigit())
    ]


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", type(None): "null"}.get(type(value), type(value).__name__)
