"""`hl7-structural` (SPEC §3.3).

Every `fields[].path` and every `correlate_by` key that is not an alias is parsed into an
`Hl7Path` here, at validation time, so a bad path is a 422 naming the key (style.md: parse path
strings once) and the check never meets one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from assay.core.assertions._base import FieldAssertion, MatchMode, TaggedAssertion
from assay.formats.hl7 import Hl7Path, Hl7PathError

__all__ = ["CORRELATION_ALIASES", "Hl7Field", "Hl7Structural"]

CORRELATION_ALIASES = ("message_type", "trigger_event", "control_id")
"""`correlate_by` keys that are not paths: `MSH-9.1^MSH-9.2`, MSH-9.2 and MSH-10."""


def _path_error(error: Hl7PathError) -> PydanticCustomError:
    return PydanticCustomError("hl7_path", "{message}", {"message": str(error)})


class Hl7Field(FieldAssertion):
    path: str
    """HL7 path, `SEG[occ].FIELD[rep].COMP.SUB`, e.g. `PID.5.1`."""

    @field_validator("path")
    @classmethod
    def _path_parses(cls, value: str) -> str:
        try:
            Hl7Path.parse(value)
        except Hl7PathError as exc:
            raise _path_error(exc) from None
        return value

    @property
    def hl7_path(self) -> Hl7Path:
        """The parsed path (cached by `Hl7Path.parse`)."""
        return Hl7Path.parse(self.path)


class Hl7Structural(TaggedAssertion):
    assert_: Literal["hl7-structural"] = Field(alias="assert")
    correlate_by: dict[str, str] = Field(default_factory=dict)
    """HL7 paths or aliases (`message_type`, `trigger_event`, `control_id`) → expected value."""
    fields: list[Hl7Field] = Field(default_factory=list)
    match: MatchMode = "any"

    @field_validator("correlate_by")
    @classmethod
    def _keys_are_paths_or_aliases(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key in CORRELATION_ALIASES:
                continue
            try:
                Hl7Path.parse(key)
            except Hl7PathError as exc:
                aliases = ", ".join(CORRELATION_ALIASES)
                raise PydanticCustomError(
                    "hl7_correlation_key",
                    "key {key} is neither an alias ({aliases}) nor an HL7 path: {reason}",
                    {"key": repr(key), "aliases": aliases, "reason": exc.reason},
                ) from None
        return value
