"""How deeply a request body may nest (SPEC §5: bad input is a 4xx, never a 500).

Real bodies (FHIR resources, datasets, assertions) stay far below `MAX_JSON_DEPTH`. Past it the
recursive work on a body — copying, reference rewriting, JSON Patch, pydantic serialization of the
response, and `json.loads` itself beyond ~1000 levels — would exhaust the stack and answer 500
(found by API fuzzing), or store a row that can never be read back.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_JSON_DEPTH", "nested_deeper_than"]

MAX_JSON_DEPTH = 100


def nested_deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests arrays/objects more than `limit` levels; iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False
