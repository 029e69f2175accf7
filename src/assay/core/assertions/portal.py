"""`portal-state-match` (docs/assertions.md)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, JsonValue

from assay.core.assertions._base import FieldAssertion, MatchMode, StrictModel, TaggedAssertion

__all__ = ["PortalAssertion", "PortalCorrelation", "PortalStateMatch"]


class PortalAssertion(FieldAssertion):
    structured_expected: ClassVar[bool] = True
    path: str
    """Dotted JSON path into the row."""


class PortalCorrelation(StrictModel):
    resource: str
    """Portal resource whose rows are candidates, e.g. `prior_auth_requests`."""
    key: str
    """Row key that identifies the row, e.g. `member_id`."""
    value: JsonValue = None
    """Value of `key` to look for; absent → the input entity's value of `key`."""


class PortalStateMatch(TaggedAssertion):
    assert_: Literal["portal-state-match"] = Field(alias="assert")
    portal: str | None = None
    """Portal slug; restricts candidates to that portal's rows (null = all)."""
    correlate_by: PortalCorrelation
    assertions: list[PortalAssertion] = Field(default_factory=list)
    match: MatchMode = "any"
