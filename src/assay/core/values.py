"""Values read from a target, and the dotted JSON path that reads them (docs/assertions.md).

A read is a `Reading`: whether the path resolved at all (`found`, which `exists` tests), the
flattened leaf values the operators compare, and the `actual` that evidence shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ABSENT", "Reading", "is_empty", "read_dotted", "read_key", "split_dotted"]


@dataclass(frozen=True, slots=True)
class Reading:
    found: bool
    """The path resolved to something, even an empty value."""
    values: tuple[Any, ...]
    """Leaf values, arrays mapped over (FHIRPath style). Empty values are kept."""
    actual: Any
    """What evidence shows: a single value unwrapped, a list for several, None when absent."""

    @classmethod
    def of(cls, values: list[Any]) -> Reading:
        """Leaf values as read: none is `ABSENT`; one is its own `actual`, several a list."""
        if not values:
            return ABSENT
        return cls(True, tuple(values), values[0] if len(values) == 1 else list(values))


ABSENT = Reading(False, (), None)


def is_empty(value: Any) -> bool:
    """Absent, null, `""`, `[]` and `{}` are empty (HL7 `""` reads as None before it gets here)."""
    return value is None or value == "" or value == [] or value == {}


def split_dotted(path: str) -> list[str | int]:
    """`participant.0.actor.display` → `["participant", 0, "actor", "display"]`."""
    return [int(part) if part.isdigit() else part for part in path.split(".")]


def read_dotted(obj: Any, path: str | list[str | int]) -> Reading:
    """Follow a dotted path into JSON; an array met without an index maps over its elements.

    A path that ends on an array yields its elements as values and the array as `actual`, so
    `contains` can test membership and `equals` a whole list by deep equality.
    """
    steps = split_dotted(path) if isinstance(path, str) else path
    nodes: list[Any] = [obj]
    for step in steps:
        nxt: list[Any] = []
        for node in nodes:
            if isinstance(step, int):
                if isinstance(node, list):
                    if step < len(node):
                        nxt.append(node[step])
                elif isinstance(node, dict) and str(step) in node:
                    nxt.append(node[str(step)])
                continue
            if isinstance(node, list):
                for item in node:
                    if isinstance(item, dict) and step in item:
                        nxt.append(item[step])
            elif isinstance(node, dict) and step in node:
                nxt.append(node[step])
        nodes = nxt
        if not nodes:
            return ABSENT
    if len(nodes) == 1:
        only = nodes[0]
        if isinstance(only, list):
            return Reading(True, tuple(only) if only else ([],), only)
        return Reading(True, (only,), only)
    flat: list[Any] = []
    for node in nodes:
        if isinstance(node, list):
            flat.extend(node)
        else:
            flat.append(node)
    return Reading(True, tuple(flat) if flat else ([],), flat)


def read_key(obj: Any, key: str) -> Reading:
    """A key read: the exact key when the mapping has it (`member.id` as one key), else dotted.

    Portal correlation keys and SFTP sidecar keys are usually plain names; an exact hit first
    keeps a key that happens to contain a dot readable.
    """
    if isinstance(obj, dict) and key in obj:
        return read_dotted({key: obj[key]}, [key])
    return read_dotted(obj, key)
