"""The voice surface's agent tools.

This is where the phone line declares its call tools (dial, say, send DTMF, hang up) once it
exists. Until then the one tool records turns of a conversation as `POST voice/turns` does.
"""

from __future__ import annotations

from typing import Any

from assay.sandboxes.tools import AgentTool, ToolRequest, ToolResponse, array, obj, string

__all__ = ["TOOLS"]

_TURN = obj(
    {
        "speaker": string("Who spoke: agent (you) or caller", enum=["agent", "caller"]),
        "text": string("What was said", minLength=1),
    },
    ["speaker", "text"],
)


def _stored(response: ToolResponse) -> dict[str, Any]:
    return {"turns": (response.json() or {}).get("data", [])}


TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="voice_turns",
        surface="voice",
        description="Record turns of a phone conversation with the member, in order (what you said, what they said).",
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
