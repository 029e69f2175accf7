"""`hl7-structural` (SPEC §3.3)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from assay.core.assertions._base import FieldAssertion, MatchMode, TaggedAssertion

__all__ = ["Hl7Field", "Hl7Structural"]


class Hl7Field(FieldAssertion):
    path: str
    """HL7 path, `SEG[occ].FIELD[rep].COMP.SUB`, e.g. `PID.5.1`."""


class Hl7Structural(TaggedAssertion):
    assert_: Literal["hl7-structural"] = Field(alias="assert")
    correlate_by: dict[str, str] = Field(default_factory=dict)
    """HL7 paths or aliases (`message_type`, `trigger_event`, `control_id`) → expected value."""
    fields: list[Hl7Field] = Field(default_factory=list)
    match: MatchMode = "any"
