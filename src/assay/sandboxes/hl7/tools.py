"""The HL7v2 surface's agent tools: `hl7_send` (one message, answered with its ACK, routed as the
MLLP listener routes it) and `hl7_inbox` (the messages delivered to the agent)."""

from __future__ import annotations

from typing import Any

from assay.sandboxes.hl7.routes import MLLP_ROUTE_HEADER
from assay.sandboxes.tools import AgentTool, ToolRequest, ToolResponse, array, obj, string

__all__ = ["TOOLS"]


def _send(args: dict[str, Any]) -> ToolRequest:
    # Models write segments one per line; ER7 separates them with CR, as the MLLP frame carries them.
    message = args["message"].replace("\r\n", "\r").replace("\n", "\r").strip("\r")
    request = ToolRequest.json("POST", "/outbound", {"payload": message})
    return ToolRequest(
        request.method,
        request.path,
        headers={**request.headers, MLLP_ROUTE_HEADER: "mllp"},
        content=request.content,
    )


def _ack(response: ToolResponse) -> dict[str, Any]:
    ack = response.text
    segments = [segment.split("|") for segment in ack.replace("\n", "\r").split("\r")]
    msa = next((fields for fields in segments if fields[0] == "MSA"), [])
    err = [fields for fields in segments if fields[0] == "ERR"]
    code = msa[1] if len(msa) > 1 else ""
    out: dict[str, Any] = {"accepted": code in {"AA", "CA"}, "code": code, "ack": ack}
    if len(msa) > 3 and msa[3]:
        out["text"] = msa[3]
    if err:
        out["errors"] = ["|".join(fields) for fields in err]
    return out


TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="hl7_send",
        surface="hl7",
        description="Send one HL7 v2 message (ER7 text, segments one per line or CR-separated) to the "
        "receiving system, as over MLLP; answers its ACK (MSA code AA accepted, AE/AR refused with the reason). "
        "MSH-6.1 must name the receiving facility task_read gives (facts.hl7.receiving_facility).",
        input_schema=obj(
            {"message": string("The HL7 v2 message, starting with its MSH segment", minLength=1)}, ["message"]
        ),
        output_schema=obj(
            {
                "accepted": {"type": "boolean", "description": "True when MSA-1 is AA (or CA)"},
                "code": {"type": "string", "description": "MSA-1: AA, AE or AR"},
                "text": {"type": "string", "description": "MSA-3, the reason given with a refusal"},
                "errors": array("ERR segments of a refusal", {"type": "string"}),
                "ack": {"type": "string", "description": "The whole ACK message (ER7, CR-separated)"},
            },
            ["accepted", "code", "ack"],
        ),
        build=_send,
        read=_ack,
        facts=("receiving_facility",),
    ),
    AgentTool(
        name="hl7_inbox",
        surface="hl7",
        description="Read the HL7 v2 messages delivered to you (your inbox), oldest first.",
        input_schema=obj({}),
        output_schema=obj(
            {
                "messages": array(
                    "The delivered messages",
                    obj(
                        {
                            "id": {"type": "string", "description": "The message's id"},
                            "message": {"type": "string", "description": "The message (ER7)"},
                            "received_at": {"type": "string", "description": "When it was delivered"},
                        },
                        closed=False,
                    ),
                )
            },
            ["messages"],
        ),
        build=lambda args: ToolRequest("GET", "/inbox"),
        read=lambda response: {"messages": (response.json() or {}).get("data", [])},
    ),
)
