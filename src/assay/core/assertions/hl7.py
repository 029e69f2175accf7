"""`hl7-structural` (docs/assertions.md).

Every `fields[].path` and every `correlate_by` key that is not an alias is parsed into an
`Hl7Path` here, at validation time, so a bad path is a 422 naming the key (parse path
strings once) and the check never meets one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from assay.core.assertions._base import CorrelatedAssertion, MatchMode, PathField
from assay.formats.hl7 import Hl7Path

__all__ = ["CORRELATION_ALIASES", "Hl7Field", "Hl7Structural"]

CORRELATION_ALIASES = ("message_type", "trigger_event", "control_id")
"""`correlate_by` keys that are not paths: `MSH-9.1^MSH-9.2`, MSH-9.2 and MSH-10."""


class Hl7Field(PathField):
    grammar = Hl7Path

    path: str
    """HL7 path, `SEG[occ].FIELD[rep].COMP.SUB`, e.g. `PID.5.1`."""

    @property
    def hl7_path(self) -> Hl7Path:
        """The parsed path (cached by `Hl7Path.parse`)."""
        return Hl7Path.parse(self.path)


class Hl7Structural(CorrelatedAssertion):
    correlation_aliases = CORRELATION_ALIASES
    grammar = Hl7Path
    grammar_name = "HL7"

    assert_: Literal["hl7-structural"] = Field(alias="assert")
    correlate_by: dict[str, str] = Field(default_factory=dict)
    """HL7 paths or aliases (`message_type`, `trigger_event`, `control_id`) → expected value."""
    fields: list[Hl7Field] = Field(default_factory=list)
    match: MatchMode = "any"
