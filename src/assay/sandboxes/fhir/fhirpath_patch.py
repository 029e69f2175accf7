"""FHIRPath Patch (R4 fhirpatch.html): a `Parameters` resource of `operation`s, each `type` (add,
insert, delete, replace, move), `path` (FHIRPath), and `name` / `value` / `index` / `source` /
`destination` as the type needs.

Paths are any FHIRPath that selects elements of the resource (`where(...)`, indexers, `first()`,
`last()`, nested elements, choice elements): fhirpathpy evaluates them and says where each
selected node lives (`formats/fhir/fhirpath.py::locate_fhirpath`), and the operation changes
those nodes. R4's rules: "The FHIRPath statement must return a single element" (for `insert` and
`move`, the items of one list); "Except for the delete operation, it is an error if no element
matches the specified path"; delete removes "a single element", nothing if none is found; values
must fit where they go (the patched resource is validated like any write). A path that does not
parse, or names an unknown function, is a malformed patch (400); a path that selects nothing, more
than one element, or something that is not an element of the resource (a computed value, another
resource) cannot be applied (422, RFC 5789 §2.2, which R4 http.html refers PATCH to). `add` to an
absent element makes a list when the R4B model says it repeats.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.formats.fhir.errors import FhirPathError
from assay.formats.fhir.fhirpath import locate_fhirpath
from assay.sandboxes.fhir.outcomes import FhirError

__all__ = ["apply_fhirpath_patch", "is_fhirpath_patch"]

_STEP = re.compile(r"\.([A-Za-z][A-Za-z0-9]*)(?:\[(\d+)\])?")


@dataclass
class _Slot:
    """Where one selected element lives: `parent[key]`, or `parent[key][index]` in a list; `path`
    is its concrete FHIRPath (`Patient.name[0]`)."""

    parent: dict[str, Any]
    key: str
    index: int | None
    path: str

    def get(self) -> Any:
        value = self.parent[self.key]
        return value[self.index] if self.index is not None else value


def is_fhirpath_patch(body: Any) -> bool:
    return isinstance(body, dict) and body.get("resourceType") == "Parameters"


def _member_key(container: dict[str, Any], name: str) -> str | None:
    """The JSON key of element `name`: itself, or a choice element's typed key (`value` →
    `valueQuantity`)."""
    if name in container:
        return name
    for key in container:
        if key.startswith(name) and key[len(name) : len(name) + 1].isupper():
            return key
    return None


def _slot(resource: dict[str, Any], located: str, label: str) -> _Slot | dict[str, Any]:
    """The slot a concrete path (`Patient.contact[0].name`) names in `resource`; the resource
    itself for its bare type."""
    kind = str(resource.get("resourceType"))
    if not located.startswith(kind):
        raise FhirError(422, f"{label}: {located!r} is not an element of this {kind}")
    rest = located[len(kind) :]
    node: Any = resource
    slot: _Slot | dict[str, Any] = resource
    at = 0
    while at < len(rest):
        step = _STEP.match(rest, at)
        key = _member_key(node, step[1]) if step and isinstance(node, dict) else None
        if step is None or key is None:
            raise FhirError(422, f"{label}: {located!r} is not an element of this {kind}")
        at = step.end()
        slot = _Slot(node, key, int(step[2]) if step[2] is not None else None, f"{kind}{rest[:at]}")
        node = slot.get()
    return slot


def _select(resource: dict[str, Any], path: Any, label: str) -> list[_Slot | dict[str, Any]]:
    if not isinstance(path, str) or not path.strip():
        raise FhirError(400, f"{label}: an operation needs a path (a FHIRPath expression)")
    try:
        located = locate_fhirpath(path, resource)
    except FhirPathError as error:
        raise FhirError(400, f"{label}: path {path!r}: {error}") from None
    if None in located:
        raise FhirError(
            422, f"{label}: path {path!r} selects a value that is not an element of this resource"
        )
    return [_slot(resource, p, label) for p in located if p is not None]


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
    if not nodes:
        raise FhirError(422, f"{label}: no element matches the path {path!r}")
    if len(nodes) != 1:
        raise FhirError(422, f"{label}: path {path!r} selects {len(nodes)} elements; it must select one")
    return nodes[0]


def apply_fhirpath_patch(
    body: dict[str, Any], resource: dict[str, Any], is_list: Callable[[dict[str, Any], str, str], bool]
) -> dict[str, Any]:
    """`resource` (a copy) with the FHIRPath Patch `body` applied; 400 for a malformed patch,
    422 for one that cannot be applied. `is_list(resource, path, name)` tells whether an absent
    element `name` under the element at the concrete `path` repeats."""
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
        if kind not in ("add", "insert", "delete", "replace", "move"):
            raise FhirError(
                400, f"{label}: an operation needs a type (add, insert, delete, replace, move) and a path"
            )
        nodes = _select(patched, path, label)
        if kind == "delete":
            if len(nodes) > 1:
                raise FhirError(
                    422, f"{label}: path {path!r} selects {len(nodes)} elements; only one can be deleted"
                )
            for node in nodes:
                if not isinstance(node, _Slot):
                    raise FhirError(422, f"{label}: cannot delete the resource itself")
                _remove(node)
            continue
        if kind in ("insert", "move"):
            slots = [n for n in nodes if isinstance(n, _Slot) and n.index is not None]
            if not nodes and kind == "insert":
                slots = [_empty_list(patched, str(path), label)]
            elif not nodes:
                raise FhirError(422, f"{label}: no element matches the path {path!r}")
            elif len(slots) != len(nodes) or len({(id(n.parent), n.key) for n in slots}) != 1:
                raise FhirError(422, f"{label}: path {path!r} must select the items of one list")
            elif len(slots) != len(_items(slots[0])):
                raise FhirError(422, f"{label}: path {path!r} selects only some items of a list")
            _reorder(slots[0], kind, parts, label)
            continue
        target = _one(nodes, label, str(path))
        if kind == "replace":
            if not isinstance(target, _Slot):
                raise FhirError(422, f"{label}: cannot replace the resource itself")
            _put(target, parts.get("value"))
        else:
            _add(patched, target, str(path), parts, label, is_list)
    return patched


def _empty_list(resource: dict[str, Any], path: str, label: str) -> _Slot:
    """`insert` into a list that has no items yet: `Parent.path.name` whose parent is one element
    (HAPI reads insert paths as the parent plus the list's name too)."""
    parent, dot, name = path.rpartition(".")
    if not dot or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
        raise FhirError(422, f"{label}: no element matches the path {path!r}")
    container = _value_of(_one(_select(resource, parent, label), label, parent))
    if not isinstance(container, dict) or container.get(name) not in (None, []):
        raise FhirError(422, f"{label}: no element matches the path {path!r}")
    container[name] = []
    return _Slot(container, name, 0, path)


def _items(node: Any) -> list[Any]:
    items = node.parent.get(node.key) if isinstance(node, _Slot) else None
    return items if isinstance(items, list) else []


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
    if not isinstance(name, str) or not name or not isinstance(container, dict):
        raise FhirError(422, f"{label}: add needs a name and a path that selects an element")
    existing = container.get(name)
    if isinstance(existing, list):
        existing.append(value)
    elif existing is not None:
        raise FhirError(422, f"{label}: {path}.{name} already has a value (use replace)")
    else:
        where = target.path if isinstance(target, _Slot) else str(resource.get("resourceType"))
        container[name] = [value] if is_list(resource, where, name) else value


def _reorder(target: _Slot, kind: str, parts: dict[str, Any], label: str) -> None:
    """`insert` (value at `index`) and `move` (`source` to `destination`) within a list."""
    items = target.parent[target.key]
    try:
        if not items and kind == "insert" and parts.get("index") not in (0, "0"):
            del target.parent[target.key]  # the list made for it stays absent
            raise ValueError(parts.get("index"))
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
