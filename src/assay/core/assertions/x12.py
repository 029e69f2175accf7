"""`x12-response` (docs/assertions.md).

Every `fields[].path` and every `correlate_by` key that is not an alias is parsed into an
`X12Path` here, at validation time, so a bad path is a 422 naming the key (parse path
strings once) and the check never meets one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from assay.core.assertions._base import CorrelatedAssertion, MatchMode, PathField
from assay.formats.x12 import X12Path

__all__ = ["CORRELATION_ALIASES", "X12Field", "X12Response"]

CORRELATION_ALIASES = ("member_id", "trace_number", "patient_control_number")
"""`correlate_by` keys that are not paths; what each reads depends on the transaction (docs/assertions.md)."""


class X12Field(PathField):
    grammar = X12Path

    path: str
    """Loop-aware X12 path, `[LOOP/]...SEG[FILTER]...NN[~REP][-COMP]`: `2110C/EB[#1]01` (EB01 of the
    first EB), `2100C/NM1[IL]09` (NM109 of the NM1 whose NM101 is IL), `EB03~2`, `SV101-2`."""

    @property
    def x12_path(self) -> X12Path:
        """The parsed path (cached by `X12Path.parse`)."""
        return X12Path.parse(self.path)


class X12Response(CorrelatedAssertion):
    correlation_aliases = CORRELATION_ALIASES
    grammar = X12Path
    grammar_name = "X12"

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
