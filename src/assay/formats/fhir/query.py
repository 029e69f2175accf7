"""Search parameters parsed once into typed values (`search_terms`, where each type says how it
matches; docs/assertions.md).

`parse_search(resource_type, params)` is the one way in: a key is `code[:modifier]`, a list
repeats the parameter (AND), commas inside a value are OR (`\\,` escapes one). Chained keys
(`subject.name`, `subject:Patient.name`, several links deep) and reverse chains
(`_has:Condition:subject:code`) parse into `Chain` / `Has` links holding the inner search; composite
parameters (`code-value-quantity=loinc|8480-6$gt100`) into `CompositeQuery` values (R4 search.html
§3.1.1.5.5–8). Unknown and special parameters, and modifiers this engine does not implement, raise
`UnknownSearchParameter`; a bad value raises `InvalidSearch`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation

from assay.formats.fhir._composites import COMPOSITES
from assay.formats.fhir.dates import date_range
from assay.formats.fhir.errors import InvalidSearch, UnknownSearchParameter
from assay.formats.fhir.parameters import SearchParameter, is_resource_type, search_parameter
from assay.formats.fhir.references import parse_reference
from assay.formats.fhir.search_terms import (
    SCANNED_MODIFIERS,
    Chain,
    CompositeQuery,
    Criterion,
    DateQuery,
    Has,
    MissingQuery,
    NumberQuery,
    OfTypeQuery,
    ParsedSearch,
    QuantityQuery,
    QueryValue,
    ReferenceQuery,
    SortKey,
    StringQuery,
    TokenQuery,
    UriQuery,
)
from assay.formats.fhir.values import normalize_text

__all__ = [
    "MODIFIERS",
    "PREFIXES",
    "check_search_keys",
    "parse_search",
    "parse_search_key",
]

PREFIXES = ("eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap")
_PREFIXED = frozenset({"date", "number", "quantity"})
MODIFIERS: dict[str, frozenset[str]] = {  # what each parameter type takes (`capability.py` lists it)
    "token": frozenset({"not", "missing", "text", "of-type"}),
    "string": frozenset({"exact", "contains", "missing"}),
    "reference": frozenset({"missing", "identifier"}),
    "date": frozenset({"missing"}),
    "number": frozenset({"missing"}),
    "quantity": frozenset({"missing"}),
    "uri": frozenset({"missing", "below", "above"}),
    "composite": frozenset(),
}
SCANNED = frozenset({"text", "of-type", "identifier"})
"""Modifiers matched by reading each candidate resource (`formats/fhir/modifiers.py`), not an index."""
IGNORED = frozenset({"_include", "_revinclude", "_summary", "_elements", "_total", "_format", "_pretty"})
"""Result parameters: they shape a response page, never the candidates (docs/assertions.md)."""
_PREFIX = re.compile(r"^([a-z]{2})(?=[-+.\d])")


# -- parsing ------------------------------------------------------------------------------------


def _is_link(key: str) -> bool:
    return key.startswith("_has:") or "." in key


def _chain_targets(resource_type: str, key: str) -> tuple[SearchParameter, list[tuple[str, str]]]:
    """A chained key's reference parameter and the (target type, inner key) pairs it searches:
    the `:Type` modifier's type, else every target type that has the inner parameter."""
    head, _, rest = key.partition(".")
    code, _, kind = head.partition(":")
    parameter = search_parameter(resource_type, code) if is_resource_type(resource_type) else None
    if parameter is None or parameter.type != "reference" or not rest:
        raise UnknownSearchParameter(key)
    if kind and not is_resource_type(kind):
        raise UnknownSearchParameter(key)
    pairs = []
    for target in (kind,) if kind else parameter.targets:
        try:
            check_search_keys(target, {rest: ""})
        except UnknownSearchParameter:
            continue
        pairs.append((target, rest))
    if not pairs:
        raise UnknownSearchParameter(key)
    return parameter, pairs


def _has_source(resource_type: str, key: str) -> tuple[str, str, str]:
    """`_has:Type:param:rest` → (Type, param, rest); the param must be a reference that can
    point at `resource_type`."""
    parts = key.split(":", 3)
    if len(parts) != 4 or not all(parts) or not is_resource_type(parts[1]):
        raise UnknownSearchParameter(key)
    _, source, code, rest = parts
    parameter = search_parameter(source, code)
    if parameter is None or parameter.type != "reference":
        raise UnknownSearchParameter(key)
    if parameter.targets and resource_type not in parameter.targets:
        raise UnknownSearchParameter(key)
    try:
        check_search_keys(source, {rest: ""})
    except UnknownSearchParameter:
        raise UnknownSearchParameter(key) from None
    return source, code, rest


def _link(resource_type: str, key: str, values: list[str]) -> Chain | Has:
    if key.startswith("_has:"):
        source, code, rest = _has_source(resource_type, key)
        return Has(key, code, parse_search(source, {rest: values}))
    parameter, pairs = _chain_targets(resource_type, key)
    return Chain(parameter, key, tuple(parse_search(target, {rest: values}) for target, rest in pairs))


def parse_search_key(resource_type: str, key: str) -> tuple[SearchParameter, str | None]:
    """The parameter and modifier a (non-chained) key names; `UnknownSearchParameter` when
    unsupported."""
    if _is_link(key) or not is_resource_type(resource_type):
        raise UnknownSearchParameter(key)
    return _parameter_and_modifier(resource_type, key)


def _parameter_and_modifier(resource_type: str, key: str) -> tuple[SearchParameter, str | None]:
    """`parse_search_key` once the type is known and the key is no chain (`parse_search` checked
    both already, once per search rather than once per key)."""
    name, _, modifier = key.partition(":")
    parameter = search_parameter(resource_type, name)
    if parameter is None:
        raise UnknownSearchParameter(key)
    if parameter.type == "composite" and name in COMPOSITES.get(resource_type, {}):
        if modifier:
            raise UnknownSearchParameter(key)
        return parameter, None
    if not parameter.supported:
        raise UnknownSearchParameter(key)
    if not modifier:
        return parameter, None
    allowed = MODIFIERS[parameter.type]
    if modifier in allowed:
        return parameter, modifier
    if parameter.type == "reference" and is_resource_type(modifier):
        return parameter, modifier
    raise UnknownSearchParameter(key)


def _split_or(value: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in value:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _split_pipe(value: str) -> list[str]:
    return re.split(r"(?<!\\)\|", value)


def _unescape(value: str) -> str:
    return re.sub(r"\\([\\,$|])", r"\1", value)


def _prefixed(key: str, raw: str) -> tuple[str, str]:
    match = _PREFIX.match(raw)
    if match is None:
        return "eq", raw
    if match[1] not in PREFIXES:
        raise InvalidSearch(
            f"invalid prefix {match[1]!r} in {key}={raw}; expected one of {', '.join(PREFIXES)}"
        )
    return match[1], raw[2:]


def _number(key: str, raw: str, prefix: str) -> NumberQuery:
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise InvalidSearch(f"invalid number {raw!r} for {key}") from None
    if not value.is_finite():
        raise InvalidSearch(f"invalid number {raw!r} for {key}")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    half = Decimal(5).scaleb(exponent - 1)
    return NumberQuery(prefix, value, value - half, value + half)


def _composite(parameter: SearchParameter, key: str, raw: str) -> CompositeQuery:
    _, components = COMPOSITES[parameter.resource_type][parameter.code]
    parts = re.split(r"(?<!\\)\$", raw)
    if len(parts) != len(components):
        raise InvalidSearch(f"{key}={raw!r}: a value of {key} is {len(components)} parts joined by $")
    parsed = []
    for (code, kind, _), part in zip(components, parts, strict=True):
        component = SearchParameter(parameter.resource_type, code, kind, "")
        parsed.append((kind, _parse_value(component, key, None, part)))
    return CompositeQuery(tuple(parsed))


def _scanned_value(key: str, modifier: str, raw: str) -> QueryValue:
    """The value of a `:text`, `:of-type` or `:identifier` criterion."""
    if modifier == "text":
        text = _unescape(raw)
        return StringQuery(text, normalize_text(text))
    pieces = _split_pipe(raw)
    if modifier == "of-type":
        if len(pieces) != 3 or not pieces[1] or not pieces[2]:
            raise InvalidSearch(f"{key}={raw!r}: :of-type takes system|code|value")
        return OfTypeQuery(_unescape(pieces[0]) or None, _unescape(pieces[1]), _unescape(pieces[2]))
    if len(pieces) == 1:
        return TokenQuery(_unescape(raw))
    return TokenQuery(_unescape("|".join(pieces[1:])) or None, _unescape(pieces[0]) or None, True)


def _parse_value(parameter: SearchParameter, key: str, modifier: str | None, raw: str) -> QueryValue:
    kind = parameter.type
    if modifier == "missing":
        if raw not in ("true", "false"):
            raise InvalidSearch(f"{key} takes true or false, not {raw!r}")
        return MissingQuery(raw == "true")
    if kind == "composite":
        return _composite(parameter, key, raw)
    if modifier in SCANNED_MODIFIERS:
        return _scanned_value(key, modifier, raw)
    if kind in _PREFIXED:
        prefix, rest = _prefixed(key, raw)
        if kind == "date":
            found = date_range(rest)
            if found is None:
                raise InvalidSearch(
                    f"invalid date {rest!r} for {key}; expected YYYY[-MM[-DD[Thh:mm[:ss][Z]]]]"
                )
            return DateQuery(prefix, found)
        if kind == "number":
            return _number(key, rest, prefix)
        pieces = _split_pipe(rest)
        if len(pieces) not in (1, 3):
            raise InvalidSearch(f"invalid quantity {raw!r} for {key}; expected [prefix]number|system|code")
        system = _unescape(pieces[1]) or None if len(pieces) == 3 else None
        code = _unescape(pieces[2]) or None if len(pieces) == 3 else None
        return QuantityQuery(_number(key, pieces[0], prefix), system, code)
    if kind == "token":
        pieces = _split_pipe(raw)
        if len(pieces) == 1:
            return TokenQuery(_unescape(raw))
        system, code = _unescape(pieces[0]), _unescape("|".join(pieces[1:]))
        return TokenQuery(code or None, system or None, True)
    if kind == "string":
        text = _unescape(raw)
        return StringQuery(text, normalize_text(text))
    if kind == "reference":
        return _reference(modifier, _unescape(raw))
    return UriQuery(_unescape(raw))


def _reference(modifier: str | None, raw: str) -> ReferenceQuery:
    target = parse_reference(raw)
    if target.type and target.id:
        if modifier and modifier != target.type:
            return ReferenceQuery(raw, modifier, None)
        return ReferenceQuery(raw, target.type, target.id)
    if "/" not in raw and ":" not in raw and raw:
        return ReferenceQuery(raw, modifier, raw)
    return ReferenceQuery(raw, None, None)


def _as_list(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _count(values: list[str]) -> int:
    raw = values[-1].strip()
    if not raw.isdigit():
        raise InvalidSearch(f"_count must be a whole number >= 0, not {raw!r}")
    return int(raw)


def _sort(resource_type: str, values: list[str]) -> tuple[SortKey, ...]:
    keys: list[SortKey] = []
    for value in values:
        for item in value.split(","):
            name = item.strip()
            if not name:
                continue
            descending = name.startswith("-")
            parameter, modifier = parse_search_key(resource_type, name.lstrip("-"))
            if modifier or parameter.type == "composite":
                raise UnknownSearchParameter(name.lstrip("-"))
            keys.append(SortKey(parameter, descending))
    return tuple(keys)


def check_search_keys(resource_type: str, params: Mapping[str, str | Sequence[str]]) -> None:
    """Validate only the keys (and `_sort` names), not the values: what a 422 at create judges.

    Raises:
        UnknownSearchParameter: the first unknown or unsupported parameter.
    """
    for key, given in params.items():
        if key.partition(":")[0] in IGNORED or key == "_count":
            continue
        if key.startswith("_has:"):
            _has_source(resource_type, key)
        elif "." in key:
            _chain_targets(resource_type, key)
        elif key == "_sort":
            _sort(resource_type, _as_list(given))
        else:
            parse_search_key(resource_type, key)


def parse_search(resource_type: str, params: Mapping[str, str | Sequence[str]]) -> ParsedSearch:
    """Parse FHIR search parameters for `resource_type` (docs/assertions.md).

    Raises:
        UnknownSearchParameter: an unknown type or parameter, or an unsupported kind or modifier.
        InvalidSearch: a bad value (malformed date, bad prefix, `_count` not a number).
    """
    if not is_resource_type(resource_type):
        raise InvalidSearch(f"unknown resource type {resource_type}")
    criteria: list[Criterion] = []
    sort: tuple[SortKey, ...] = ()
    count: int | None = None
    includes: list[str] = []
    ignored: dict[str, tuple[str, ...]] = {}
    links: list[Chain | Has] = []
    for key, given in params.items():
        values = _as_list(given)
        name = key.partition(":")[0]
        if name in IGNORED:
            if name in ("_include", "_revinclude"):
                includes.extend(f"{key}={v}" for v in values)
            else:
                ignored[key] = tuple(values)
            continue
        if key == "_count":
            count = _count(values)
            continue
        if key == "_sort":
            sort = _sort(resource_type, values)
            continue
        if "." in key or key.startswith("_has:"):  # `_is_link`, inline: this loop is per search
            links.extend(_link(resource_type, key, [value]) for value in values if value != "")
            continue
        parameter, modifier = _parameter_and_modifier(resource_type, key)
        scanned = parameter.type == "composite" or modifier in SCANNED_MODIFIERS
        for value in values:
            ors = [v for v in _split_or(value) if v != ""]
            if ors:
                parsed = tuple(_parse_value(parameter, key, modifier, v) for v in ors)
                criteria.append(Criterion(parameter, key, modifier, parsed, scanned))
    return ParsedSearch(resource_type, tuple(criteria), sort, count, tuple(includes), ignored, tuple(links))
