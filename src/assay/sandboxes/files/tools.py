"""The files surface's agent tools: `sftp_list`, `sftp_read`, `sftp_write` — the SFTP drop through
the files API, which goes through the same `FilesAccess` (paths, limits, events) as the SFTP server."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from assay.sandboxes.tools import AgentTool, ToolInputError, ToolRequest, ToolResponse, array, obj, string

__all__ = ["TOOLS"]

_PATH = string(
    "The file's path on the drop, relative to its root, e.g. inbox/referrals/letter.txt", minLength=1
)
_ENCODING = string("How `content` is written: utf-8 text (default) or base64 bytes", enum=["utf-8", "base64"])
_TEXTUAL = ("text/", "application/json", "application/xml", "application/edi-x12", "x-application/hl7")


def _file(path: str) -> str:
    return "/" + quote(path.strip().lstrip("/"), safe="/")


def _read(response: ToolResponse) -> dict[str, Any]:
    content_type = response.headers.get("content-type", "application/octet-stream")
    if content_type.startswith("application/json") and response.body.startswith(b'{"data"'):
        raise ToolInputError({"path": "is a folder: list it with sftp_list"})
    try:
        if not content_type.startswith(_TEXTUAL):
            raise UnicodeDecodeError("utf-8", b"", 0, 1, "binary type")
        content, encoding = response.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(response.body).decode("ascii"), "base64"
    return {
        "content": content,
        "encoding": encoding,
        "content_type": content_type,
        "size": len(response.body),
    }


def _write(args: dict[str, Any]) -> ToolRequest:
    content = args["content"]
    if args.get("encoding") == "base64":
        try:
            body = base64.b64decode(content, validate=True)
        except ValueError:
            raise ToolInputError({"content": "is not valid base64"}) from None
    else:
        body = content.encode("utf-8")
    headers = {"Content-Type": args["content_type"]} if args.get("content_type") else {}
    return ToolRequest("PUT", _file(args["path"]), headers=headers, content=body)


_ENTRY = obj(
    {
        "path": {"type": "string", "description": "The file's path"},
        "size": {"type": "integer", "description": "Its size in bytes"},
        "content_type": {"type": "string", "description": "Its media type"},
        "sha256": {"type": "string", "description": "Its SHA-256, hex"},
    },
    closed=False,
)

TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="sftp_list",
        surface="files",
        description="List the files on the SFTP drop (recursively, oldest first), optionally under a folder.",
        input_schema=obj({"prefix": string("Only files under this folder, e.g. inbox/referrals/")}),
        output_schema=obj({"files": array("The files", _ENTRY)}, ["files"]),
        build=lambda args: ToolRequest("GET", "", params=[("prefix", args.get("prefix") or "")]),
        read=lambda response: {"files": (response.json() or {}).get("data", [])},
    ),
    AgentTool(
        name="sftp_read",
        surface="files",
        description="Read one file from the SFTP drop; text comes back as utf-8, anything else as base64.",
        input_schema=obj({"path": _PATH}, ["path"]),
        output_schema=obj(
            {
                "content": {"type": "string", "description": "The file's content"},
                "encoding": {"type": "string", "description": "utf-8 or base64"},
                "content_type": {"type": "string", "description": "Its media type"},
                "size": {"type": "integer", "description": "Its size in bytes"},
            },
            ["content", "encoding", "content_type", "size"],
        ),
        build=lambda args: ToolRequest("GET", _file(args["path"])),
        read=_read,
    ),
    AgentTool(
        name="sftp_write",
        surface="files",
        description="Write a file on the SFTP drop (created, or replaced when it exists); folders are made as needed.",
        input_schema=obj(
            {
                "path": _PATH,
                "content": string("The file's content (text, or base64 with encoding=base64)"),
                "encoding": _ENCODING,
                "content_type": string("Its media type (default: guessed from the extension)"),
            },
            ["path", "content"],
        ),
        output_schema=_ENTRY,
        build=_write,
        read=lambda response: response.json() or {},
    ),
)
