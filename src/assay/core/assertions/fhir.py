"""`fhir-resource-state` (docs/assertions.md).

Validation makes a bad assertion a 422 at create time: an unknown resource type, a search
parameter the type does not have or this engine does not support (composite, chained, `_has`,
an unimplemented modifier: `unknown search parameter <p>`), a FHIRPath expression that does not
compile. At verify time (`AT_VERIFY` in the validation context) only the resource type is checked
here; the check itself reports an unknown parameter as `unsupported assertion: unknown search
parameter <p>` and a bad FHIRPath as a failed field, exactly as docs/assertions.md word them.
Search *values* (a malformed date) are judged at verify: a failed criterion with the reason.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from assay.core.assertions._base import AT_VERIFY, FieldAssertion, MatchMode, TaggedAssertion, exactly_one
from assay.formats.fhir import (
    FhirPathError,
    UnknownSearchParameter,
    check_search_keys,
    compile_fhirpath,
    is_resource_type,
)

__all__ = ["FhirField", "FhirResourceState", "known_resource_type", "search_as_text"]


def _at_verify(info: ValidationInfo) -> bool:
    return bool((info.context or {}).get(AT_VERIFY))


class FhirField(FieldAssertion):
    path: str | None = None
    """Dotted path into the resource, array indexes as numbers: `participant.0.actor.display`."""
    fhirpath: str | None = None
    """A FHIRPath expression evaluated on the resource, instead of `path`."""

    @model_validator(mode="after")
    def _one_locator(self) -> FhirField:
        exactly_one(self, "path", "fhirpath")
        return self

    @field_validator("fhirpath")
    @classmethod
    def _fhirpath_compiles(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not _at_verify(info):
            try:
                compile_fhirpath(value)
            except FhirPathError as exc:
                raise PydanticCustomError(
                    "invalid_fhirpath", "invalid FHIRPath: {error}", {"error": str(exc)}
                ) from None
        return value


class FhirResourceState(TaggedAssertion):
    assert_: Literal["fhir-resource-state"] = Field(alias="assert")
    resource_type: str
    """FHIR resource type, e.g. `Appointment`."""
    search: dict[str, str | list[str]] = Field(default_factory=dict)
    """FHIR search parameters; a list repeats the parameter (AND), commas inside a value are OR."""
    fields: list[FhirField] = Field(default_factory=list)
    match: MatchMode = "any"

    _known_type = field_validator("resource_type")(classmethod(lambda cls, value: known_resource_type(value)))
    _scalars_as_text = field_validator("search", mode="before")(
        classmethod(lambda cls, value: search_as_text(value))
    )

    @field_validator("search")
    @classmethod
    def _known_parameters(
        cls, value: dict[str, str | list[str]], info: ValidationInfo
    ) -> dict[str, str | list[str]]:
        resource_type = info.data.get("resource_type")
        if resource_type is None or _at_verify(info):
            return value
        try:
            check_search_keys(resource_type, value)
        except UnknownSearchParameter as exc:
            raise PydanticCustomError(
                "unknown_search_parameter", "{message}", {"message": str(exc)}
            ) from None
        return value


def known_resource_type(value: str) -> str:
    """`value` when it is a FHIR R4 resource type; a validation error naming it otherwise."""
    if not is_resource_type(value):
        raise PydanticCustomError(
            "unknown_resource_type", "unknown FHIR R4 resource type {type}", {"type": value}
        )
    return value


def search_as_text(value: Any) -> Any:
    """YAML task files write `_count: 5` and `active: true`; search values are text."""
    if not isinstance(value, dict):
        return value
    return {key: _text(given) for key, given in value.items()}


def _text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return [_text(item) for item in value]
    return value
