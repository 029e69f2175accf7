"""`x12-response` (SPEC §3.7)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from assay.core.assertions._base import FieldAssertion, MatchMode, TaggedAssertion

__all__ = ["X12Field", "X12Response"]


class X12Field(FieldAssertion):
    path: str
    """Loop-aware X12 path, `[LOOP/]...SEG[FILTER]...NN[~REP][-COMP]`, e.g. `2110C/EB[1]03`."""


class X12Response(TaggedAssertion):
    assert_: Literal["x12-response"] = Field(alias="assert")
    transaction: Literal["270", "271", "276", "277", "278"] | None = None
    """Exchange filter: 270/271 eligibility, 276/277 claim status, 278 authorization."""
    correlate_by: dict[str, str] = Field(default_factory=dict)
    """X12 paths or aliases (`member_id`, `trace_number`, `patient_control_number`) → value."""
    fields: list[X12Field] = Field(default_factory=list)
    match: MatchMode = "any"

    @field_validator("transaction", mode="before")
    @classmethod
    def _number_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value
