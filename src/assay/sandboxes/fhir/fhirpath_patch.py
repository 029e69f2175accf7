"""FHIRPath Patch (R4 fhirpatch.html): a `Parameters` resource of `operation`s, each `type` (add,
insert, delete, replace, move), `path` (FHIRPath), and `name` / `value` / `index` / `source` /
`destination` as the type needs.

Paths are the simple FHIRPath agents write: `Type.element`, `[n]`, `.first()`, `.last()` and
`.where(field = 'literal')` steps (a path using anything else is 422, naming the operation).
`add` appends to a list element that exists; for an absent element, whether it is a list comes
from the R4B model (the one `validation.py` uses). R4: `delete` of nothing is not an error; every
other path must select exactly one element (else 422).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.sandboxes.fhir.outcomes import FhirError

__all__ = ["apply_fhirpath_patch", "is_fhirpath_patch"]

_STEP = re.compile(r"\.(?P<name>[A-Za-z][A-Za-z0-9_]*)(?P<call>\((?P<argument>[^()]*)\))?|\[(?P<index>\d+)\]")
_WHERE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*=\s*'([^']*)'\s*$")


@dataclass
class _Slot:
    """Where one selected element lives: `parent[key]`, or `parent[key][index]` in a list."""

    parent: dict[str, Any]
    key: str
    index: int | None

    def get(self) -> Any:
        value = self.parent[self.key]
        return value[self.index] if self.index is not None else value


def is_fhirpath_patch(body: Any) -> bool:
    return isinstance(body, dict) and body.get("resourceType") == "Parameters"


def _select(resource: dict[str, Any], path: str, label: str) -> list[Any]:
    kind = resource.get("resourceType")
    if not isinstance(path, str) or not path.startswith(f"{kind}"):
        raise FhirError(422, f"{label}: path {path!r} must start with {kind}")
    rest = path[len(str(kind)) :]
    nodes: list[Any] = [resource]
    at = 0
    while at < len(rest):
        step = _STEP.match(rest, at)
        if step is None:
            raise FhirError(422, f"{label}: unsupported FHIRPath {path!r} (at {rest[at:]!r})")
        at = step.end()
        if step["index"] is not None:
            position = int(step["index"])
            nodes = nodes[position : position + 1]
        elif step["call"] is not None:
            nodes = _call(nodes, step["name"], step["argument"] or "", label, path)
        else:
            nodes = _member(nodes, step["name"])
    return nodes


def _member(nodes: list[Any], name: str) -> list[Any]:
    found: list[Any] = []
    for node in nodes:
        container = node.get() if isinstance(node, _Slot) else node
        if isinstance(container, dict) and name in container:
            value = container[name]
            if isinstance(value, list):
                found.extend(_Slot(container, name, i) for i in range(len(value)))
            else:
                found.append(_Slot(container, name, None))
    return found


def _call(nodes: list[Any], name: str, argument: str, label: str, path: str) -> list[Any]:
    if name == "first":
        return nodes[:1]
    if name == "last":
        return nodes[-1:]
    where = _WHERE.match(argument)
    if name == "where" and where:
        field, literal = where.groups()
        return [n for n in nodes if isinstance(v := _value_of(n), dict) and v.get(field) == literal]
    raise FhirError(422, f"{label}: unsupported FHIRPath function {name}({argument}) in {path!r}")


def _value_of(node: Any) -> Any:
    return node.get() if isinstance(node, _Slot) else node


def _part_value(part: dict[str, Any]) -> Any:
    """A `value[x]`, or a complex value built from nested `part`s (R4 fhirpatch.html)."""
    for key, value in part.items():
        if key.startswith("value"):
            return value
    built: dict[str, Any] = {}
    for child in part.get("part") or []:
        if isinstance(child, dict) and isinstance(child.get("name"), str):
            value = _part_value(child)
            if child["name"] in built:
                existing = built[child["name"]]
                built[child["name"]] = [*existing, value] if isinstance(existing, list) else [existing, value]
            else:
                built[child["name"]] = value
    return built


def _parts(operation: dict[str, Any]) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    for part in operation.get("part") or []:
        if isinstance(part, dict) and isinstance(part.get("name"), str):
            parts[part["name"]] = (
                _part_value(part)
                if part["name"] == "value"
                else next((v for k, v in part.items() if k.startswith("value")), None)
            )
    return parts


def _one(nodes: list[Any], label: str, path: str) -> Any:
    if len(nodes) != 1:
        raise FhirError(422, f"{label}: path {path!r} selects {len(nodes)} elements; it must select one")
    return nodes[0]


def apply_fhirpath_patch(
    body: dict[str, Any], resource: dict[str, Any], is_list: Callable[[dict[str, Any], str, str], bool]
) -> dict[str, Any]:
    """`resource` (a copy) with the FHIRPath Patch `body` applied; 400 for a malformed patch,
    422 for one that cannot be applied. `is_list(resource, path, name)` tells whether an absent
    element `name` under `path` repeats."""
    operations = [
        p for p in body.get("parameter") or [] if isinstance(p, dict) and p.get("name") == "operation"
    ]
    if not operations:
        raise FhirError(400, "a FHIRPath Patch is a Parameters resource with at least one 'operation'")
    patched = copy.deepcopy(resource)
    for number, operation in enumerate(operations):
        parts = _parts(operation)
        kind, path = parts.get("type"), parts.get("path")
        label = f"FHIRPath Patch operation {number} ({kind})"
        if kind not in ("add", "insert", "delete", "replace", "move") or not isinstance(path, str):
            raise FhirError(
                400, f"{label}: an operation needs a type (add, insert, delete, replace, move) and a path"
            )
        nodes = _select(patched, path, label)
        if kind == "delete":
            for node in reversed(nodes):  # list items from the end, so indexes stay valid
                if isinstance(node, _Slot):
                    _remove(node)
            continue
        if kind in ("insert", "move"):
            lists = {(id(n.parent), n.key) for n in nodes if isinstance(n, _Slot)}
            if len(lists) != 1:
                raise FhirError(422, f"{label}: path {path!r} must select one list")
            _reorder(nodes[0], kind, parts, label)
            continue
        target = _one(nodes, label, path)
        if kind == "replace":
            if not isinstance(target, _Slot):
                raise FhirError(422, f"{label}: cannot replace the resource itself")
            _put(target, parts.get("value"))
        else:
            _add(patched, target, path, parts, label, is_list)
    return patched


def _remove(slot: _Slot) -> None:
    if slot.index is None:
        del slot.parent[slot.key]
        return
    items = slot.parent[slot.key]
    del items[slot.index]
    if not items:
        del slot.parent[slot.key]


def _put(slot: _Slot, value: Any) -> None:
    if slot.index is None:
        slot.parent[slot.key] = value
    else:
        slot.parent[slot.key][slot.index] = value


def _add(
    resource: dict[str, Any], target: Any, path: str, parts: dict[str, Any], label: str,
    is_list: Callable[[dict[str, Any], str, str], bool],
) -> None:  # fmt: skip
    name, value = parts.get("name"), parts.get("value")
    container = _value_of(target)
    if not isinstance(name, str) or not isinstance(container, dict):
        raise FhirError(422, f"{label}: add needs a name and a path that selects an element")
    existing = container.get(name)
    if isinstance(existing, list):
        existing.append(value)
    elif existing is not None:
        raise FhirError(422, f"{label}: {path}.{name} already has a value (use replace)")
    else:
        container[name] = [value] if is_list(resource, path, name) else value


def _reorder(target: Any, kind: str, parts: dict[str, Any], label: str) -> None:
    """`insert` (value at `index`) and `move` (`source` to `destination`) within a list."""
    if not isinstance(target, _Slot):
        raise FhirError(422, f"{label}: {kind} needs a path that selects a list element")
    items = target.parent.get(target.key)
    if not isinstance(items, list):
        items = target.parent[target.key] = [items]
    try:
        if kind == "insert":
            index = int(parts.get("index"))  # type: ignore[arg-type]
            if not 0 <= index <= len(items):
                raise ValueError(index)
            items.insert(index, parts.get("value"))
        else:
            source, destination = int(parts.get("source")), int(parts.get("destination"))  # type: ignore[arg-type]
            if not (0 <= source < len(items) and 0 <= destination < len(items)):
                raise ValueError(source)
            items.insert(destination, items.pop(source))
    except (TypeError, ValueError):
        raise FhirError(422, f"{label}: index out of range for {target.key} ({len(items)} items)") from None
