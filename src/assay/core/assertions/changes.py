"""`no-unexpected-changes` (issue 14): the agent's writes compared with the seeded baseline.

An allow entry names what the agent may change: `{resourceType, change?, search?}` for FHIR (the
changed resource must be among the final state's search results; a deleted resource can only be
allowed without `search`, since it is no longer there to match), `{path}` (a glob) for files.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from assay.core.assertions._base import StrictModel, TaggedAssertion
from assay.core.assertions.fhir import known_resource_type, search_as_text

__all__ = ["AllowPath", "AllowResource", "NoUnexpectedChanges"]

Change = Literal["created", "updated", "deleted"]


class AllowResource(StrictModel):
    resource_type: str = Field(alias="resourceType")
    change: Change | None = None
    search: dict[str, str | list[str]] | None = None

    _known_type = field_validator("resource_type")(classmethod(lambda cls, value: known_resource_type(value)))
    _scalars_as_text = field_validator("search", mode="before")(
        classmethod(lambda cls, value: search_as_text(value))
    )


class AllowPath(StrictModel):
    path: str
    """A glob over the SFTP tree's relative paths (`outbound/*.pdf`)."""


class NoUnexpectedChanges(TaggedAssertion):
    assert_: Literal["no-unexpected-changes"] = Field(alias="assert")
    surfaces: list[Literal["fhir", "files"]] | None = None
    """Surfaces compared; None means every surface the state has a baseline for."""
    allow: list[AllowResource | AllowPath] = Field(default_factory=list)
