"""The payer portal's agent tools: `portal_list`, `portal_get`, `portal_submit` over its REST API."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from assay.sandboxes.tools import AgentTool, ToolRequest, ToolResponse, array, obj, string

__all__ = ["TOOLS"]

_RESOURCE = string(
    "The portal's resource (a collection), e.g. prior_auth_requests, members, claims",
    pattern="^[A-Za-z0-9_\\-]{1,64}$",
)
_ROW = {"type": "object", "description": "One row of the resource"}


def _list(args: dict[str, Any]) -> ToolRequest:
    pairs = [(str(key), str(value)) for key, value in (args.get("filters") or {}).items()]
    if args.get("limit"):
        pairs.append(("limit", str(args["limit"])))
    if args.get("cursor"):
        pairs.append(("cursor", str(args["cursor"])))
    return ToolRequest("GET", "/" + quote(args["resource"]), params=pairs)


def _page(response: ToolResponse) -> dict[str, Any]:
    body = response.json() or {}
    return {"rows": body.get("data", []), "next": (body.get("_meta") or {}).get("next")}


TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="portal_list",
        surface="portal",
        description="List rows of one portal resource, newest first; filters match fields (dotted for nested ones).",
        input_schema=obj(
            {
                "resource": _RESOURCE,
                "filters": {
                    "type": "object",
                    "description": 'Field → value to match, e.g. {"status": "approved", "patient.member_id": "M123456"}',
                    "additionalProperties": {"type": ["string", "number", "boolean"]},
                },
                "limit": {
                    "type": "integer",
                    "description": "Rows per page, 1..100 (default 20)",
                    "minimum": 1,
                    "maximum": 100,
                },
                "cursor": string("`next` of the previous page, to read the following one"),
            },
            ["resource"],
        ),
        output_schema=obj(
            {
                "rows": array("The rows of this page", _ROW),
                "next": {"type": ["string", "null"], "description": "Cursor of the next page, or null"},
            },
            ["rows"],
        ),
        build=_list,
        read=_page,
    ),
    AgentTool(
        name="portal_get",
        surface="portal",
        description="Read one row of a portal resource by its key.",
        input_schema=obj(
            {"resource": _RESOURCE, "key": string("The row's key", minLength=1)}, ["resource", "key"]
        ),
        output_schema=obj({"row": _ROW}, ["row"]),
        build=lambda args: ToolRequest("GET", f"/{quote(args['resource'])}/{quote(args['key'], safe='')}"),
        read=lambda response: {"row": response.json() or {}},
    ),
    AgentTool(
        name="portal_submit",
        surface="portal",
        description="Submit a new row to a portal resource (a form), e.g. a prior authorization request; "
        "answers the stored row with its key (a prior_auth_requests row is decided at once: see its status).",
        input_schema=obj(
            {"resource": _RESOURCE, "record": {**_ROW, "description": "The row's fields"}},
            ["resource", "record"],
        ),
        output_schema=obj({"row": _ROW}, ["row"]),
        build=lambda args: ToolRequest.json("POST", "/" + quote(args["resource"]), args["record"]),
        read=lambda response: {"row": response.json() or {}},
    ),
)
