"""Search criteria answered by reading each candidate resource rather than an index: token
`:text` and `:of-type`, reference `:identifier`, and composite parameters (R4 search.html).

These are rare in agents' queries and need parts of an element the indexes do not keep (a
CodeableConcept's texts, an Identifier's type, a Reference's identifier, two values of one
element), so `FhirStore` runs them last, over the candidates the indexed criteria left.

- `:text` (§3.1.1.4.5.4 "the search parameter is processed as a string search against the text
  associated with the code/value"): `CodeableConcept.text`, `Coding.display` or
  `Identifier.type.text`, case- and accent-insensitively, matching the start of the text or of any
  word in it (HAPI's full-text match is word-based too): `diabetes` finds "Type 2 diabetes".
- `:of-type` (token on Identifier): `system|code|value` — an Identifier whose `type` has that
  coding and whose `value` is exactly `value`.
- `:identifier` (reference): `[system|]value` against `Reference.identifier`.
- Composite (§3.1.1.5.5): one element (the parameter's expression) must match every component.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from assay.formats.fhir._composites import COMPOSITES
from assay.formats.fhir.extract import Typed, compile_extractor, split_union
from assay.formats.fhir.search_terms import (
    CompositeQuery,
    Criterion,
    DateQuery,
    NumberQuery,
    OfTypeQuery,
    QuantityQuery,
    ReferenceQuery,
    StringQuery,
    TokenQuery,
    UriQuery,
)
from assay.formats.fhir.values import INDEXERS, QuantityValue, normalize_text

__all__ = ["matcher"]

_OF_TYPE = re.compile(r"^(\w+)\.ofType\((\w+)\)$")
_PRIMITIVE_CHOICES = frozenset({"string", "dateTime", "boolean", "integer", "decimal", "date", "time"})


def matcher(resource_type: str, criterion: Criterion) -> Callable[[dict[str, Any]], bool]:
    """A test of one resource against `criterion` (whose values are OR-ed)."""
    parameter = criterion.parameter
    if parameter.type == "composite":
        expression, components = COMPOSITES[resource_type][parameter.code]
        nodes = compile_extractor(resource_type, expression)
        relatives = [_relative(expr) for _, _, expr in components]

        def composite(resource: dict[str, Any]) -> bool:
            for node in nodes(resource):
                for query in criterion.values:
                    assert isinstance(query, CompositeQuery)
                    if all(
                        any(_value_matches(kind, value, typed) for typed in relative(node.value))
                        for (kind, value), relative in zip(query.components, relatives, strict=True)
                    ):
                        return True
            return False

        return composite
    extract = compile_extractor(resource_type, parameter.expression)
    test = {"text": _text, "of-type": _of_type, "identifier": _identifier}[criterion.modifier or ""]

    def scanned(resource: dict[str, Any]) -> bool:
        return any(test(typed.value, query) for typed in extract(resource) for query in criterion.values)

    return scanned


# -- :text, :of-type, :identifier ----------------------------------------------------------------


def _texts(value: Any) -> Iterable[str]:
    if not isinstance(value, dict):
        return
    for key in ("text", "display"):
        if isinstance(value.get(key), str):
            yield value[key]
    codings = value.get("coding")
    for coding in codings if isinstance(codings, list) else ():
        if isinstance(coding, dict) and isinstance(coding.get("display"), str):
            yield coding["display"]
    kind = value.get("type")
    if isinstance(kind, dict):  # Identifier.type
        yield from _texts(kind)


def _text(value: Any, query: Any) -> bool:
    assert isinstance(query, StringQuery)
    wanted = query.normalized
    for text in _texts(value):
        normalized = normalize_text(text)
        if normalized.startswith(wanted) or any(
            word.startswith(wanted) for word in re.split(r"\W+", normalized)
        ):
            return True
    return False


def _of_type(value: Any, query: Any) -> bool:
    assert isinstance(query, OfTypeQuery)
    if not isinstance(value, dict) or value.get("value") != query.value:
        return False
    kind = value.get("type")
    codings = kind.get("coding") if isinstance(kind, dict) else None
    return any(
        isinstance(c, dict)
        and c.get("code") == query.code
        and (query.system is None or c.get("system") == query.system)
        for c in (codings if isinstance(codings, list) else ())
    )


def _identifier(value: Any, query: Any) -> bool:
    assert isinstance(query, TokenQuery)
    identifier = value.get("identifier") if isinstance(value, dict) else None
    if not isinstance(identifier, dict) or identifier.get("value") != query.code:
        return False
    return not query.system_given or identifier.get("system") == query.system


# -- composite -----------------------------------------------------------------------------------


def _relative(expression: str) -> Callable[[Any], list[Typed]]:
    """A component's expression, relative to the composite's element: `code`, `a.b`,
    `value.ofType(Quantity)` and unions of them (every R4 component but two `%resource` ones,
    which match nothing here)."""
    paths: list[tuple[list[str], str | None]] = []
    for part in split_union(expression):
        part = part.strip()
        found = _OF_TYPE.match(part)
        if found:
            choice = found[2][0].upper() + found[2][1:]
            kind = found[2] if found[2] in _PRIMITIVE_CHOICES else choice
            paths.append(([found[1] + choice], kind))
        elif re.fullmatch(r"\w+(\.\w+)*", part):
            paths.append((part.split("."), None))

    def walk(node: Any) -> list[Typed]:
        out: list[Typed] = []
        for steps, kind in paths:
            current = [node]
            for step in steps:
                nxt: list[Any] = []
                for item in current:
                    value = item.get(step) if isinstance(item, dict) else None
                    nxt.extend(value if isinstance(value, list) else [value] if value is not None else [])
                current = nxt
            out.extend(Typed(value, kind) for value in current)
        return out

    return walk


def _value_matches(kind: str, query: Any, typed: Typed) -> bool:
    values = INDEXERS[kind](typed)
    if isinstance(query, TokenQuery):
        return any(_token_matches(query, system, code) for system, code in values)
    if isinstance(query, QuantityQuery):
        return any(isinstance(v, QuantityValue) and query.matches(v) for v in values)
    if isinstance(query, DateQuery):
        return any(query.matches(v) for v in values)
    if isinstance(query, NumberQuery):
        return any(isinstance(v, Decimal) and query.matches_point(v) for v in values)
    if isinstance(query, StringQuery):
        return any(normalize_text(v).startswith(query.normalized) for v in values)
    if isinstance(query, ReferenceQuery):
        return any(query.id is not None and v.id == query.id for v in values)
    if isinstance(query, UriQuery):
        return query.uri in values
    return False


def _token_matches(query: TokenQuery, system: str | None, code: str) -> bool:
    if query.code is not None and query.code != code:
        return False
    if not query.system_given:
        return True
    return (system or None) == query.system
