"""Values of a search parameter in a resource: its expression compiled once into Python.

Search-parameter expressions are nearly all plain paths: dotted members, `|` unions,
`.where(field='literal')`, `ofType(T)` / `as T` on choice elements (`Observation.value.ofType(
Quantity)` reads `valueQuantity`), `[n]` indexes and the generator's reference-type filter
(`resolve() is X` rewritten). Those compile to a list of steps walked over the JSON with no
FHIRPath engine at all; the FHIR type of each result comes from the FHIRPath R4 model, so a
`ContactPoint` is never mistaken for an `Identifier`. Anything else (`Patient.deceased.exists()
and …`) falls back to fhirpathpy, compiled once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fhirpathpy.models import models

from assay.formats.fhir.errors import FhirPathError
from assay.formats.fhir.fhirpath import compile_fhirpath
from assay.formats.fhir.references import reference_type

__all__ = ["Extractor", "Typed", "compile_extractor", "split_union"]

_R4 = models["r4"]
_PATH_TYPES: dict[str, str] = _R4["path2Type"]
_CHOICES: dict[str, list[str]] = _R4["choiceTypePaths"]
_ELSEWHERE: dict[str, str] = _R4["pathsDefinedElsewhere"]
_CONTAINERS = frozenset({"BackboneElement", "Element"})


@dataclass(frozen=True, slots=True)
class Typed:
    """One value of a parameter in a resource, with its FHIR type when known."""

    value: Any
    fhir_type: str | None


Extractor = Callable[[dict[str, Any]], list[Typed]]


# -- parsing the supported subset --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Member:
    name: str


@dataclass(frozen=True, slots=True)
class _OfType:
    type: str


@dataclass(frozen=True, slots=True)
class _WhereEquals:
    field: str
    literal: str


@dataclass(frozen=True, slots=True)
class _WhereReferenceTo:
    type: str


@dataclass(frozen=True, slots=True)
class _Index:
    position: int


_Step = _Member | _OfType | _WhereEquals | _WhereReferenceTo | _Index

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHERE_EQUALS = re.compile(r"^\s*(\w+)\s*=\s*'([^'\\]*)'\s*$")
_WHERE_REFERENCE = re.compile(
    r"^reference\.startsWith\('(\w+)/'\) or reference\.contains\('/\1/'\) or type = '\1'$"
)


class _Untranslatable(Exception):
    pass


def split_union(expression: str) -> list[str]:
    """Split a FHIRPath expression on `|` outside parentheses and string literals."""
    parts: list[str] = []
    depth, quoted, start = 0, False, 0
    for i, char in enumerate(expression):
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(expression[start:i].strip())
            start = i + 1
    parts.append(expression[start:].strip())
    return [part for part in parts if part]


def _closing(text: str, open_at: int) -> int:
    depth, quoted = 0, False
    for i in range(open_at, len(text)):
        char = text[i]
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
    raise _Untranslatable(text)


def _parse_steps(text: str) -> list[_Step]:
    text = text.strip()
    steps: list[_Step] = []
    i = 0
    if text.startswith("("):
        end = _closing(text, 0)
        steps.extend(_parse_steps(text[1:end]))
        i = end + 1
    while i < len(text):
        if text.startswith(" as ", i):
            match = _IDENTIFIER.match(text, i + 4)
            if match is None:
                raise _Untranslatable(text)
            steps.append(_OfType(match[0]))
            i = match.end()
            continue
        if text[i] == "[":
            end = text.index("]", i)
            steps.append(_Index(int(text[i + 1 : end])))
            i = end + 1
            continue
        if text[i] == "." or (i == 0 and not steps):
            start = i + 1 if text[i] == "." else i
            match = _IDENTIFIER.match(text, start)
            if match is None:
                raise _Untranslatable(text)
            name, i = match[0], match.end()
            if i < len(text) and text[i] == "(":
                end = _closing(text, i)
                steps.append(_function(name, text[i + 1 : end]))
                i = end + 1
            else:
                steps.append(_Member(name))
            continue
        raise _Untranslatable(text)
    return steps


def _function(name: str, argument: str) -> _Step:
    if name in ("ofType", "as") and _IDENTIFIER.fullmatch(argument.strip()):
        return _OfType(argument.strip())
    if name == "where":
        if match := _WHERE_REFERENCE.match(argument.strip()):
            return _WhereReferenceTo(match[1])
        if match := _WHERE_EQUALS.match(argument):
            return _WhereEquals(match[1], match[2])
    raise _Untranslatable(name)


# -- typing the steps against the R4 model ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Path:
    """A walk from the resource root; keys already resolved to JSON names (`valueQuantity`)."""

    steps: tuple[_Step, ...]
    fhir_type: str | None


def _normal_type(name: str | None) -> str | None:
    if name is None:
        return None
    if name.startswith("System."):
        name = name.removeprefix("System.")
        return name[0].lower() + name[1:]
    return name


def _choice_key(name: str, choice: str) -> str:
    return name + choice[0].upper() + choice[1:]


_PRIMITIVES = frozenset(
    [
        "base64Binary",
        "boolean",
        "canonical",
        "code",
        "date",
        "dateTime",
        "decimal",
        "id",
        "instant",
        "integer",
        "markdown",
        "oid",
        "positiveInt",
        "string",
        "time",
        "unsignedInt",
        "uri",
        "url",
        "uuid",
    ]
)


def _choice_type(context: str, key: str, choice: str) -> str:
    known = _normal_type(_PATH_TYPES.get(f"{context}.{key}"))
    if known:
        return known
    lowered = choice[0].lower() + choice[1:]
    return lowered if lowered in _PRIMITIVES else choice


def _context_after(path: str, fhir_type: str | None) -> str | None:
    if fhir_type is None or fhir_type in _CONTAINERS:
        return path
    return fhir_type


def _typed_paths(resource_type: str, steps: list[_Step]) -> list[_Path]:
    if not steps or steps[0] != _Member(resource_type):
        raise _Untranslatable(resource_type)
    partial: list[tuple[list[_Step], str | None, str | None]] = [([], resource_type, resource_type)]
    i = 1
    while i < len(steps):
        step = steps[i]
        following = steps[i + 1] if i + 1 < len(steps) else None
        grown: list[tuple[list[_Step], str | None, str | None]] = []
        consumed = 1
        for walked, context, fhir_type in partial:
            if not isinstance(step, _Member):
                if isinstance(step, _OfType):
                    raise _Untranslatable("ofType outside a choice element")
                grown.append(([*walked, step], context, fhir_type))
                continue
            path = f"{context}.{step.name}" if context else None
            if path is not None:
                path = _ELSEWHERE.get(path, path)
            choices = _CHOICES.get(path or "")
            if choices and isinstance(following, _OfType):
                wanted = following.type
                match = next((c for c in choices if c.lower() == wanted.lower()), None)
                if match is None:
                    raise _Untranslatable(f"{path} has no choice {wanted}")
                key = _choice_key(step.name, match)
                kind = _choice_type(context or "", key, wanted)
                grown.append(([*walked, _Member(key)], _context_after(f"{context}.{key}", kind), kind))
                consumed = 2
            elif choices:
                for choice in choices:
                    key = _choice_key(step.name, choice)
                    kind = _choice_type(context or "", key, choice)
                    grown.append(([*walked, _Member(key)], _context_after(f"{context}.{key}", kind), kind))
            else:
                plain = _normal_type(_PATH_TYPES.get(path or ""))
                if plain is None and path is not None and not _has_children(path):
                    grown.append(([*walked, step], None, None))
                else:
                    grown.append(([*walked, step], _context_after(path or "", plain), plain))
        partial = grown
        i += consumed
    return [_Path(tuple(walked), fhir_type) for walked, _, fhir_type in partial]


@lru_cache(maxsize=4096)
def _has_children(path: str) -> bool:
    prefix = path + "."
    return any(key.startswith(prefix) for key in _PATH_TYPES)


# -- running -----------------------------------------------------------------------------------


def _walk(resource: dict[str, Any], path: _Path) -> list[Typed]:
    nodes: list[Any] = [resource]
    for step in path.steps:
        if isinstance(step, _Member):
            name = step.name
            found: list[Any] = []
            for node in nodes:
                if isinstance(node, dict):
                    value = node.get(name)
                    if isinstance(value, list):
                        found.extend(v for v in value if v is not None)
                    elif value is not None:
                        found.append(value)
            nodes = found
        elif isinstance(step, _WhereEquals):
            nodes = [n for n in nodes if isinstance(n, dict) and n.get(step.field) == step.literal]
        elif isinstance(step, _WhereReferenceTo):
            nodes = [n for n in nodes if isinstance(n, dict) and reference_type(n) == step.type]
        elif isinstance(step, _Index):
            nodes = nodes[step.position : step.position + 1]
        if not nodes:
            return []
    return [Typed(node, path.fhir_type) for node in nodes]


def _translated(paths: list[_Path]) -> Extractor:
    if len(paths) == 1:
        only = paths[0]
        return lambda resource: _walk(resource, only)

    def extract(resource: dict[str, Any]) -> list[Typed]:
        values: list[Typed] = []
        for path in paths:
            values.extend(_walk(resource, path))
        return values

    return extract


def _fallback(expression: str) -> Extractor:
    compiled = compile_fhirpath(expression)

    def extract(resource: dict[str, Any]) -> list[Typed]:
        try:
            return [Typed(value, None) for value in compiled(resource) if value is not None]
        except FhirPathError:
            return []

    return extract


def _paths(resource_type: str, expression: str) -> list[_Path]:
    """Every union branch as typed paths; `_Untranslatable`/`ValueError` when one needs fhirpathpy."""
    return [
        path for part in split_union(expression) for path in _typed_paths(resource_type, _parse_steps(part))
    ]


@lru_cache(maxsize=4096)
def compile_extractor(resource_type: str, expression: str) -> Extractor:
    """Compile a search-parameter expression for one resource type; cached."""
    try:
        paths = _paths(resource_type, expression)
    except (_Untranslatable, ValueError):
        return _fallback(expression)
    return _translated(paths)


def is_translated(resource_type: str, expression: str) -> bool:
    """True when the expression runs without fhirpathpy (the tests check every R4 parameter)."""
    try:
        _paths(resource_type, expression)
    except (_Untranslatable, ValueError):
        return False
    return True
