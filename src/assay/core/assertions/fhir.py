"""`fhir-resource-state` (SPEC §3.2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from assay.core.assertions._base import FieldAssertion, MatchMode, TaggedAssertion, exactly_one

__all__ = ["FhirField", "FhirResourceState"]


class FhirField(FieldAssertion):
    path: str | None = None
    """Dotted path into the resource, array indexes as numbers: `participant.0.actor.display`."""
    fhirpath: str | None = None
    """A FHIRPath expression evaluated on the resource, instead of `path`."""

    @model_validator(mode="after")
    def _one_locator(self) -> FhirField:
        exactly_one(self, "path", "fhirpath")
        return self


class FhirResourceState(TaggedAssertion):
    assert_: Literal["fhir-resource-state"] = Field(alias="assert")
    resource_type: str
    """FHIR resource type, e.g. `Appointment`."""
    search: dict[str, str | list[str]] = Field(default_factory=dict)
    """FHIR search parameters; a list repeats the parameter (AND), commas inside a value are OR."""
    fields: list[FhirField] = Field(default_factory=list)
    match: MatchMode = "any"
