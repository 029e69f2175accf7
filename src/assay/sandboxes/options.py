"""A surface's settings section (docs/deployment.md): the options it declares on `Surface.options`,
read from the environment once at start-up and handed to it as `deployment.option(name, key)`.

Each option is a key and a type, `{"max_length": int}`, or an `Option` with a default, a check,
and the variable that sets it when that is not `ASSAY_<NAME>_<KEY>` (the built-in surfaces keep
the names deployments already use: `ASSAY_MLLP_PORT`, `ASSAY_STORAGE_URL`). The option keyed
`port` is the port the surface's listener binds (0: any free port); `assay serve` tells a
multi-worker deployment's workers the bound one through its variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.sandboxes.surface import Surface

__all__ = [
    "LISTENER_PORT",
    "Option",
    "declared",
    "not_negative",
    "parse",
    "positive",
    "read_section",
    "resolve_section",
    "variable_of",
]

LISTENER_PORT = "port"
"""The option key of a surface's listener port."""


@dataclass(frozen=True, slots=True)
class Option:
    kind: type
    """`int`, `float`, `str` or `bool`."""
    default: Any = None
    variable: str | None = None
    """The environment variable that sets it; None: `ASSAY_<NAME>_<KEY>`."""
    check: Callable[[Any], str | None] | None = None
    """Why a value is refused ("must not be negative"), or None; start-up fails naming the variable."""


def declared(spec: type | Option) -> Option:
    return spec if isinstance(spec, Option) else Option(spec)


def variable_of(surface: str, key: str, spec: type | Option) -> str:
    return declared(spec).variable or f"ASSAY_{surface}_{key}".upper()


def parse(name: str, raw: str, kind: type[Any]) -> Any:
    """`raw`, the value of variable `name`, as `kind`; a `ValueError` naming the variable."""
    if kind is bool:
        if raw.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if raw.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name} must be 1 or 0, got {raw!r}")
    try:
        return kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {what}, got {raw!r}") from None


def read_section(surface: Surface, env: Mapping[str, str]) -> dict[str, Any]:
    """The surface's options that `env` sets (unset or empty: not set), parsed."""
    found: dict[str, Any] = {}
    for key, spec in surface.options.items():
        name = variable_of(surface.name, key, spec)
        raw = env.get(name)
        if raw:
            found[key] = parse(name, raw, declared(spec).kind)
    return found


def resolve_section(surface: Surface, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared option of `surface`: its value in `values` (None: unset) or its default. A key
    it does not declare, a value of the wrong type or one its check refuses is a `ValueError`
    naming the variable."""
    unknown = sorted(set(values) - set(surface.options))
    if unknown:
        raise ValueError(f"surface {surface.name!r} has no option {', '.join(map(repr, unknown))}")
    section: dict[str, Any] = {}
    for key, spec in surface.options.items():
        option = declared(spec)
        value = values.get(key)
        if value is None:
            section[key] = option.default
            continue
        name = variable_of(surface.name, key, spec)
        if not _is_a(value, option.kind):
            raise ValueError(f"{name} must be of type {option.kind.__name__}, got {value!r}")
        problem = option.check(value) if option.check is not None else None
        if problem:
            raise ValueError(f"{name} {problem}, got {value!r}")
        section[key] = value
    return section


def _is_a(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def not_negative(value: Any) -> str | None:
    return "must not be negative" if value < 0 else None


def positive(value: Any) -> str | None:
    return "must be > 0" if value <= 0 else None
