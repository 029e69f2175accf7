"""The voice surface's agent tools: the phone line's calls, and the ingest of a call made elsewhere.

`call_dial`, `call_say`, `call_dtmf`, `call_answer`, `call_hangup` and `call_list` are the calls
API (`voice/calls…`): each is one request to those routes, so the line answers, the sandbox
writes both sides of the transcript and the write gate applies, exactly as over HTTP.
`voice_turns` records turns of a conversation held elsewhere (`POST voice/turns`, `source:
reported`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from assay.sandboxes.tools import AgentTool, ToolRequest, ToolResponse, array, boolean, obj, string

__all__ = ["TOOLS"]

_TURN = obj(
    {
        "speaker": string("Who spoke: agent (you) or caller", enum=["agent", "caller"]),
        "text": string("What was said", minLength=1),
    },
    ["speaker", "text"],
)
_CALL_ID = string(
    "The call's id (`call_id` from call_dial or call_list), or `current` for the latest call",
    pattern="^[A-Za-z0-9_\\-]{1,64}$",
)
_SAID = array(
    "What the line said next, in order (each with its speaker: ivr, rep or caller)",
    {"type": "object", "description": "One turn of the line: speaker, text, kind"},
)
_CALL_OUTPUT = obj(
    {
        "call_id": string("The call's id"),
        "status": string("ringing, active or ended", enum=["ringing", "active", "ended"]),
        "said": _SAID,
        "end_reason": {"type": ["string", "null"], "description": "Why the call ended, once it has"},
    },
    ["call_id", "status"],
)


def _stored(response: ToolResponse) -> dict[str, Any]:
    return {"turns": (response.json() or {}).get("data", [])}


def _call(response: ToolResponse) -> dict[str, Any]:
    body = response.json() or {}
    return {key: body.get(key) for key in ("call_id", "status", "said", "end_reason") if key in body}


def _on_call(action: str, args: dict[str, Any], body: dict[str, Any] | None = None) -> ToolRequest:
    path = f"/calls/{quote(str(args['call_id']), safe='')}/{action}"
    return ToolRequest.json("POST", path, body or {})


TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="call_dial",
        surface="voice",
        description="Place a phone call (e.g. to the payer's line: `phone_number` in task_read's facts); "
        "answers with the call's id and what the line said first.",
        input_schema=obj({"to": string("The number to dial", minLength=1)}, ["to"]),
        output_schema=_CALL_OUTPUT,
        build=lambda args: ToolRequest.json("POST", "/calls", {"to": args["to"]}),
        read=_call,
        facts=("phone_number",),
    ),
    AgentTool(
        name="call_say",
        surface="voice",
        description="Say something on a call; answers with what the line said next.",
        input_schema=obj(
            {
                "call_id": _CALL_ID,
                "text": string("What you say", minLength=1),
                "barge_in": boolean("True if you start while the line is still speaking (default false)"),
            },
            ["call_id", "text"],
        ),
        output_schema=_CALL_OUTPUT,
        build=lambda args: _on_call(
            "say", args, {"text": args["text"], "barge_in": bool(args.get("barge_in", False))}
        ),
        read=_call,
    ),
    AgentTool(
        name="call_dtmf",
        surface="voice",
        description="Press keys on a call (menu options, an NPI, a date); answers with what the line said next.",
        input_schema=obj(
            {"call_id": _CALL_ID, "digits": string("The keys: 0-9, * and #", pattern="^[0-9*#]{1,64}$")},
            ["call_id", "digits"],
        ),
        output_schema=_CALL_OUTPUT,
        build=lambda args: _on_call("dtmf", args, {"digits": args["digits"]}),
        read=_call,
    ),
    AgentTool(
        name="call_answer",
        surface="voice",
        description="Answer a ringing inbound call (see call_list); answers with the caller's first words.",
        input_schema=obj({"call_id": _CALL_ID}, ["call_id"]),
        output_schema=_CALL_OUTPUT,
        build=lambda args: _on_call("answer", args),
        read=_call,
    ),
    AgentTool(
        name="call_hangup",
        surface="voice",
        description="Hang up a call.",
        input_schema=obj({"call_id": _CALL_ID}, ["call_id"]),
        output_schema=_CALL_OUTPUT,
        build=lambda args: _on_call("hangup", args),
        read=_call,
    ),
    AgentTool(
        name="call_list",
        surface="voice",
        description="List this task's calls, oldest first: placed ones and inbound ones (a ringing call waits to be answered).",
        input_schema=obj({}, []),
        output_schema=obj(
            {"calls": array("The calls", {"type": "object", "description": "call_id, direction, status, …"})},
            ["calls"],
        ),
        build=lambda args: ToolRequest("GET", "/calls"),
        read=lambda response: {"calls": (response.json() or {}).get("data", [])},
    ),
    AgentTool(
        name="voice_turns",
        surface="voice",
        description="Record turns of a phone conversation held outside this sandbox, in order "
        "(what you said, what they said).",
        input_schema=obj({"turns": array("The turns, in order", _TURN, minItems=1)}, ["turns"]),
        output_schema=obj(
            {
                "turns": array(
                    "The stored turns, numbered",
                    {"type": "object", "description": "A stored turn with its seq"},
                )
            },
            ["turns"],
        ),
        build=lambda args: ToolRequest.json("POST", "/turns", list(args["turns"])),
        read=_stored,
    ),
)
