"""A tool's input schema checked fast: a quick check compiled once per schema accepts the usual
well-formed arguments in a few comparisons; only what it does not accept goes to jsonschema's
validator (built once too), whose errors name what is wrong."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator

__all__ = ["checks_for"]


def checks_for(schema: dict[str, Any]) -> tuple[Draft202012Validator, Callable[[Any], bool] | None]:
    """`schema`'s validator and its quick check (None where the schema uses what it cannot check)."""
    found = _SCHEMAS.get(id(schema))
    if found is None or found[0] is not schema:
        found = _SCHEMAS[id(schema)] = (schema, Draft202012Validator(schema), _accepts(schema))
    return found[1], found[2]


_SCHEMAS: dict[int, tuple[dict[str, Any], Draft202012Validator, Callable[[Any], bool] | None]] = {}
"""Each input schema's validator and its quick check, built once (building them cost more than a
whole tool call's own work)."""

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}
_ANNOTATIONS = {"description", "title", "examples", "default"}


def _accepts(schema: Any) -> Callable[[Any], bool] | None:
    """A quick check of `schema`: True only for a value the schema accepts (a False, or a schema
    using keywords it does not know, None, leaves the answer and its messages to jsonschema).
    What tool schemas use (`sandboxes/tools.py`) is known, so a valid call skips jsonschema,
    whose walk was a fifth of a tool call."""
    if not isinstance(schema, dict):
        return None
    checks: list[Callable[[Any], bool]] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        check = _keyword(keyword, value, schema)
        if check is None:
            return None
        checks.append(check)
    if len(checks) == 1:
        return checks[0]

    def every(v: Any) -> bool:  # a loop: `all()` over a generator cost twice as much
        for check in checks:  # noqa: SIM110
            if not check(v):
                return False
        return True

    return every


def _keyword(keyword: str, value: Any, schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    if keyword in _ANNOTATIONS:
        return lambda v: True
    if keyword == "type":
        kinds = [value] if isinstance(value, str) else value
        if not isinstance(kinds, list) or not kinds or not all(kind in _TYPES for kind in kinds):
            return None
        checks = [_TYPES[kind] for kind in kinds]
        return checks[0] if len(checks) == 1 else lambda v: any(check(v) for check in checks)
    if keyword == "pattern" and isinstance(value, str):
        search = re.compile(value).search
        return lambda v: not isinstance(v, str) or search(v) is not None
    if keyword in {"minLength", "maxLength", "minItems", "maxItems"} and type(value) is int:
        kind = str if keyword.endswith("Length") else list
        at_least = keyword.startswith("min")
        return lambda v: not isinstance(v, kind) or (len(v) >= value if at_least else len(v) <= value)
    if keyword in {"minimum", "maximum"} and type(value) is int:
        at_least = keyword == "minimum"
        return lambda v: (
            isinstance(v, bool) or not isinstance(v, (int, float)) or (v >= value if at_least else v <= value)
        )
    if keyword == "enum" and isinstance(value, list) and all(isinstance(e, str) for e in value):
        allowed = frozenset(value)
        return lambda v: isinstance(v, str) and v in allowed
    if keyword == "required" and isinstance(value, list):
        names = tuple(value)
        return lambda v: not isinstance(v, dict) or all(name in v for name in names)
    if keyword == "properties" and isinstance(value, dict):
        inner = {name: _accepts(sub) for name, sub in value.items()}
        if any(check is None for check in inner.values()):
            return None
        known = {name: check for name, check in inner.items() if check is not None}

        def each_property(v: Any) -> bool:
            if isinstance(v, dict):
                for name, item in v.items():
                    check = known.get(name)
                    if check is not None and not check(item):
                        return False
            return True

        return each_property
    if keyword == "additionalProperties":
        if value is True:
            return lambda v: True
        named = schema.get("properties", {})
        if not isinstance(named, dict) or "patternProperties" in schema:
            return None
        if value is False:
            return lambda v: not isinstance(v, dict) or all(name in named for name in v)
        other = _accepts(value)
        if other is None:
            return None
        return lambda v: (
            not isinstance(v, dict) or all(other(item) for name, item in v.items() if name not in named)
        )
    if keyword == "items" and isinstance(value, dict):
        each = _accepts(value)
        if each is None:
            return None
        return lambda v: not isinstance(v, list) or all(each(item) for item in v)
    if keyword == "anyOf" and isinstance(value, list) and value:
        options = [_accepts(option) for option in value]
        if any(option is None for option in options):
            return None
        kept = [option for option in options if option is not None]
        return lambda v: any(option(v) for option in kept)
    return None
