"""The success answers the non-FHIR surfaces publish in OpenAPI (a schema-driven client or
tester learns each body's shape; schemathesis checks every answer against it).

The handlers build their JSON themselves (the agents' hot path skips FastAPI's re-encoding), so
each route states its answer with `responses=` from here; errors are the API's envelope, which the
service attaches to every surface router it mounts (`service/errors.py::ERROR_RESPONSES`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ANY_OBJECT", "json_answer", "listed", "raw_answer"]

ANY_OBJECT: dict[str, Any] = {"type": "object"}


def listed(item: dict[str, Any], *, paged: bool = False) -> dict[str, Any]:
    """`{"data": [item, ...]}`, with `_meta` paging when `paged`."""
    schema: dict[str, Any] = {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"type": "array", "items": item}},
    }
    if paged:
        schema["properties"]["_meta"] = {
            "type": "object",
            "properties": {
                "next": {"type": ["string", "null"]},
                "prev": {"type": ["string", "null"]},
                "limit": {"type": "integer"},
            },
        }
    return schema


def json_answer(
    schema: dict[str, Any], description: str, status: int = 200
) -> dict[int | str, dict[str, Any]]:
    return {status: {"description": description, "content": {"application/json": {"schema": schema}}}}


def raw_answer(media_type: str, description: str, status: int = 200) -> dict[int | str, dict[str, Any]]:
    """A body that is not JSON (an HL7 ACK, an X12 reply, a file's bytes)."""
    return {status: {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}}
