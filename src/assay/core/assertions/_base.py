"""Pieces every assertion model shares: strict config, field assertions, match modes (docs/assertions.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from assay.core.operators import LIST_EXPECTED, NO_EXPECTED, InvalidPattern, Operator, compile_pattern

__all__ = [
    "CorrelatedAssertion",
    "FieldAssertion",
    "MatchMode",
    "PathField",
    "StrictModel",
    "TaggedAssertion",
]

MatchMode = Literal["any", "first", "latest", "all"]
AT_VERIFY = "at_verify"
"""Validation-context flag: at verify time an invalid `matches` pattern is a failed field, not
a parse error (docs/assertions.md — it is a 422 only at create)."""
STRUCTURED_EXPECTED = LIST_EXPECTED | {"equals", "notEquals", "contains", "notContains"}


class StrictModel(BaseModel):
    """Unknown keys are rejected (docs/assertions.md: a 422 naming the key), values are frozen."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )


class TaggedAssertion(StrictModel):
    """Base of every assertion type (`ASSERTION_MODELS`); `assert` is the discriminator."""

    def dump(self) -> dict[str, Any]:
        """The assertion as stored and shown: field names untouched, `assert` first."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class FieldAssertion(StrictModel):
    """`{path, expected, operator?}`; subclasses add the locator keys their check reads."""

    expected: JsonValue = None
    """Expected value; a list (or comma-separated string) for `in`/`notIn`."""
    operator: Operator = "equals"
    """TestScript operator; default `equals`."""

    structured_expected: ClassVar[bool] = False
    """Whether `expected` may be any JSON value (portal-state-match, docs/assertions.md) compared by deep
    equality, rather than a scalar (or a list for `in`/`notIn`)."""

    @model_validator(mode="after")
    def _expected_fits_operator(self, info: ValidationInfo) -> FieldAssertion:
        if self.operator in NO_EXPECTED:
            return self  # `expected` is ignored, whatever its shape (docs/assertions.md)
        if self.structured_expected:
            if isinstance(self.expected, (list, dict)) and self.operator not in STRUCTURED_EXPECTED:
                raise PydanticCustomError(
                    "list_expected",
                    "an array or object `expected` needs operator equals, notEquals, in, notIn, "
                    "contains or notContains, not {operator}",
                    {"operator": self.operator},
                )
        elif isinstance(self.expected, dict):
            raise PydanticCustomError(
                "list_expected", "`expected` must be a string, number, boolean or null, not an object", {}
            )
        elif isinstance(self.expected, list) and self.operator not in LIST_EXPECTED:
            raise PydanticCustomError(
                "list_expected",
                "a list `expected` needs operator in or notIn, not {operator}",
                {"operator": self.operator},
            )
        if self.operator == "matches" and not (info.context or {}).get(AT_VERIFY):
            try:
                compile_pattern(str(self.expected))
            except InvalidPattern as exc:
                raise PydanticCustomError(
                    "invalid_pattern", "invalid regular expression: {error}", {"error": str(exc)}
                ) from None
        return self

    @property
    def locator(self) -> tuple[str, str]:
        """(evidence key, value): which key located the value, e.g. ("path", "PID.5.1")."""
        for key in ("path", "fhirpath", "key"):
            value = getattr(self, key, None)
            if value is not None:
                return key, value
        return "path", ""

    def evidence(self, actual: Any, passed: bool, error: str | None = None) -> dict[str, Any]:
        key, value = self.locator
        entry: dict[str, Any] = {key: value, "expected": self.expected, "actual": actual, "passed": passed}
        if self.operator != "equals":
            entry["operator"] = self.operator
        if error:
            entry["error"] = error
        return entry


def exactly_one(model: BaseModel, *names: str) -> None:
    given = [n for n in names if getattr(model, n, None) is not None]
    if len(given) != 1:
        raise PydanticCustomError(
            "exactly_one", "exactly one of {names} is required", {"names": " / ".join(names)}
        )


def check_path(parse: Callable[[str], Any], value: str) -> str:
    """Parse a path with its grammar once at validation; its `ValueError` becomes a clean 422."""
    try:
        parse(value)
    except ValueError as exc:
        raise PydanticCustomError("path", "{message}", {"message": str(exc)}) from None
    return value


def check_correlation_keys(
    keys: Iterable[str], aliases: tuple[str, ...], parse: Callable[[str], Any], kind: str
) -> None:
    """Each `correlate_by` key is an alias or a path of `kind` (HL7, X12)."""
    for key in keys:
        if key in aliases:
            continue
        try:
            parse(key)
        except ValueError as exc:
            reason = getattr(exc, "reason", str(exc))
            raise PydanticCustomError(
                "correlation_key",
                "correlate_by key {key} is neither an alias ({aliases}) nor an {kind} path: {reason}",
                {"key": repr(key), "aliases": ", ".join(aliases), "kind": kind, "reason": reason},
            ) from None


class PathGrammar(Protocol):
    """A path type (`Hl7Path`, `X12Path`): `parse` raises `ValueError` naming what is wrong."""

    def parse(self, text: str, /) -> Any: ...


class PathField(FieldAssertion):
    """A field assertion located by a `path` of one grammar, parsed once here, at validation, so a
    bad path is a 422 naming the key and the check never meets one. A subclass declares `path`
    (with its grammar's docstring) and its `grammar`."""

    grammar: ClassVar[PathGrammar]

    @field_validator("path", check_fields=False)
    @classmethod
    def _path_parses(cls, value: str) -> str:
        return check_path(cls.grammar.parse, value)


class CorrelatedAssertion(TaggedAssertion):
    """An assertion on a message log that picks its messages by `correlate_by`: each key is one of
    the surface's aliases or a path of its grammar. A subclass declares `correlate_by` and names the
    aliases, the path grammar and its name in a refusal (`HL7`, `X12`)."""

    correlation_aliases: ClassVar[tuple[str, ...]]
    grammar: ClassVar[PathGrammar]
    grammar_name: ClassVar[str]

    @field_validator("correlate_by", check_fields=False)
    @classmethod
    def _keys_are_paths_or_aliases(cls, value: dict[str, str]) -> dict[str, str]:
        check_correlation_keys(value, cls.correlation_aliases, cls.grammar.parse, cls.grammar_name)
        return value
