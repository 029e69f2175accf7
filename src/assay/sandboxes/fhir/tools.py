"""The FHIR surface's agent tools: capabilities, search, read, create, update, patch, transaction.

Each is one request to the surface's FHIR REST routes; the output is the FHIR JSON the route
answered (a Bundle, a resource or an OperationOutcome) with its HTTP status.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

from assay.sandboxes.tools import AgentTool, ToolInputError, ToolRequest, ToolResponse, array, obj, string

__all__ = ["TOOLS"]

FHIR_JSON = "application/fhir+json"

_TYPE = string("FHIR resource type, e.g. Patient, Practitioner, Appointment", pattern="^[A-Z][A-Za-z]{1,63}$")
_ID = string("The resource's logical id (its `id` element)", pattern="^[A-Za-z0-9\\-.]{1,64}$")
_RESOURCE = {"type": "object", "description": "The FHIR resource as JSON, with its `resourceType`"}

_ANSWER = obj(
    {
        "status": {"type": "integer", "description": "The FHIR server's HTTP status"},
        "resource": {
            "type": "object",
            "description": "The FHIR JSON answered (resource, Bundle or OperationOutcome)",
        },
        "location": {
            "type": "string",
            "description": "Where the created or updated version lives, when given",
        },
    },
    ["status", "resource"],
    closed=False,
)


def _answer(response: ToolResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"status": response.status, "resource": response.json() or {}}
    location = response.headers.get("location") or response.headers.get("content-location")
    if location:
        out["location"] = location
    return out


def _answer_text(response: ToolResponse) -> bytes | None:
    """`_answer`'s output as JSON text, the resource spliced in as the route wrote it: a search
    Bundle is most of a tool call's work when decoded and encoded again. Only a body that is a
    JSON object, and strict JSON (what orjson reads), is taken as it is; anything else goes to
    `_answer`, which answers it as before."""
    body = response.body
    if not body.startswith(b"{"):
        return None
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    out = b'{"status":' + str(response.status).encode() + b',"resource":' + body
    location = response.headers.get("location") or response.headers.get("content-location")
    if location:
        out += b',"location":' + orjson.dumps(location)
    return out + b"}"


def _path(*parts: str) -> str:
    return "".join("/" + quote(part, safe="$") for part in parts)


def _search(args: dict[str, Any]) -> ToolRequest:
    pairs: list[tuple[str, str]] = []
    for name, value in (args.get("params") or {}).items():
        for one in value if isinstance(value, list) else [value]:
            pairs.append((str(name), str(one)))
    return ToolRequest("GET", _path(args["resource_type"]), params=pairs)


def _create(args: dict[str, Any]) -> ToolRequest:
    resource = args["resource"]
    kind = args.get("resource_type") or resource.get("resourceType")
    if not isinstance(kind, str) or not kind:
        raise ToolInputError({"resource.resourceType": "required (or give resource_type)"})
    return ToolRequest.json("POST", _path(kind), resource, FHIR_JSON)


_SEARCH_VALUE = {
    "description": "One value, or several (the parameter repeated: AND)",
    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
}

TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="fhir_capabilities",
        surface="fhir",
        description="Read the FHIR server's CapabilityStatement: which resource types, interactions "
        "and search parameters it supports.",
        input_schema=obj({}),
        output_schema=_ANSWER,
        build=lambda args: ToolRequest("GET", "/metadata"),
        read=_answer,
        written=_answer_text,
    ),
    AgentTool(
        name="fhir_search",
        surface="fhir",
        description="Search one FHIR resource type (GET [type]?params); answers a searchset Bundle.",
        input_schema=obj(
            {
                "resource_type": _TYPE,
                "params": {
                    "type": "object",
                    "description": 'Search parameters by name, e.g. {"name": "Smith", "_count": "10"}',
                    "additionalProperties": _SEARCH_VALUE,
                },
            },
            ["resource_type"],
        ),
        output_schema=_ANSWER,
        build=_search,
        read=_answer,
        written=_answer_text,
    ),
    AgentTool(
        name="fhir_read",
        surface="fhir",
        description="Read one FHIR resource by type and id (GET [type]/[id]).",
        input_schema=obj({"resource_type": _TYPE, "id": _ID}, ["resource_type", "id"]),
        output_schema=_ANSWER,
        build=lambda args: ToolRequest("GET", _path(args["resource_type"], args["id"])),
        read=_answer,
        written=_answer_text,
    ),
    AgentTool(
        name="fhir_create",
        surface="fhir",
        description="Create a FHIR resource (POST [type]); the server assigns its id.",
        input_schema=obj(
            {
                "resource": _RESOURCE,
                "resource_type": {
                    **_TYPE,
                    "description": "The resource type (default: the resource's resourceType)",
                },
            },
            ["resource"],
        ),
        output_schema=_ANSWER,
        build=_create,
        read=_answer,
        written=_answer_text,
    ),
    AgentTool(
        name="fhir_update",
        surface="fhir",
        description="Replace a FHIR resource with a new version (PUT [type]/[id]); creates it when absent.",
        input_schema=obj(
            {
                "resource_type": _TYPE,
                "id": _ID,
                "resource": {**_RESOURCE, "description": "The whole new resource; its id must be `id`"},
            },
            ["resource_type", "id", "resource"],
        ),
        output_schema=_ANSWER,
        build=lambda args: ToolRequest.json(
            "PUT", _path(args["resource_type"], args["id"]), args["resource"], FHIR_JSON
        ),
        read=_answer,
        written=_answer_text,
    ),
    AgentTool(
        name="fhir_patch",
        surface="fhir",
        description="Change part of a FHIR resource with a JSON Patch (RFC 6902) (PATCH [type]/[id]).",
        input_schema=obj(
            {
                "resource_type": _TYPE,
                "id": _ID,
                "patch": array(
                    'JSON Patch operations, e.g. [{"op": "replace", "path": "/telecom/0/value", "value": "555-0142"}]',
                    {"type": "object", "description": "One operation: op, path, and value or from"},
                    minItems=1,
                ),
            },
            ["resource_type", "id", "patch"],
        ),
        output_schema=_ANSWER,
        build=lambda args: ToolRequest.json(
            "PATCH", _path(args["resource_type"], args["id"]), args["patch"], "application/json-patch+json"
        ),
        read=_answer,
        written=_answer_text,
    ),
    AgentTool(
        name="fhir_transaction",
        surface="fhir",
        description="Send a FHIR batch or transaction Bundle (POST to the base); answers the response Bundle.",
        input_schema=obj(
            {
                "bundle": {
                    "type": "object",
                    "description": "A Bundle of type batch or transaction, with its entries",
                }
            },
            ["bundle"],
        ),
        output_schema=_ANSWER,
        build=lambda args: ToolRequest.json("POST", "", args["bundle"], FHIR_JSON),
        read=_answer,
        written=_answer_text,
    ),
)
