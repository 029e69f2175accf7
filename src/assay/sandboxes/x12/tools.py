"""The X12 surface's agent tools: `x12_eligibility` (270 → 271, the 270 built from fields or sent
raw), `x12_claim_status` (276 → 277) and `x12_prior_auth` (278 request → 278 response).

A 270 built from fields is the same interchange an agent would write by hand (005010X279A1, one
subscriber, one service type); the answer is the payer's raw reply either way, with its kind
(`271`, `277`, `278`, or the `999`/`TA1` refusal of a request it could not read).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from assay.sandboxes.tools import AgentTool, ToolInputError, ToolRequest, ToolResponse, obj, string

__all__ = ["TOOLS", "eligibility_270"]

MEDIA_TYPE = "application/edi-x12"
_DATE = "^\\d{4}-\\d{2}-\\d{2}$"
_SAFE = re.compile(r"^[^*~:^]*$")
"""An element may not hold a delimiter of the interchange it is built into."""


def _element(args: dict[str, Any], key: str, default: str = "") -> str:
    value = str(args.get(key, default) or default).strip()
    if not _SAFE.match(value):
        raise ToolInputError({key: "may not contain the X12 delimiters * ~ : ^"})
    return value


def _d8(args: dict[str, Any], key: str) -> str:
    return _element(args, key).replace("-", "")


def eligibility_270(args: dict[str, Any], now: datetime | None = None) -> str:
    """A 270 for one subscriber from the tool's fields."""
    now = now or datetime.now(UTC)
    sender = _element(args, "sender_id", "ASSAYAGENT")[:15]
    receiver = _element(args, "payer_id", "PAYER")[:15]
    control = f"{int(now.timestamp()) % 1_000_000_000:09d}"
    date6, date8, time4 = now.strftime("%y%m%d"), now.strftime("%Y%m%d"), now.strftime("%H%M")
    trace = _element(args, "trace_number", f"TRN{control}")
    segments = [
        "ST*270*0001*005010X279A1",
        f"BHT*0022*13*{trace}*{date8}*{time4}",
        "HL*1**20*1",
        f"NM1*PR*2*{_element(args, 'payer_name', 'PAYER')}*****PI*{_element(args, 'payer_id', 'PAYER')}",
        "HL*2*1*21*1",
        f"NM1*1P*2*{_element(args, 'provider_name', 'PROVIDER')}*****XX*{_element(args, 'provider_npi')}",
        "HL*3*2*22*0",
        f"TRN*1*{trace}*9ASSAYAGNT",
        f"NM1*IL*1*{_element(args, 'last_name')}*{_element(args, 'first_name')}****MI*{_element(args, 'member_id')}",
    ]
    if args.get("birth_date"):
        segments.append(f"DMG*D8*{_d8(args, 'birth_date')}")
    if args.get("service_date"):
        segments.append(f"DTP*291*D8*{_d8(args, 'service_date')}")
    segments.append(f"EQ*{_element(args, 'service_type', '30')}")
    segments.append(f"SE*{len(segments) + 1}*0001")
    isa = (
        f"ISA*00*{'':10}*00*{'':10}*ZZ*{sender:<15}*ZZ*{receiver:<15}*{date6}*{time4}*^*00501*{control}*0*T*:"
    )
    body = [
        isa,
        f"GS*HS*{sender}*{receiver}*{date8}*{time4}*1*X*005010X279A1",
        *segments,
        "GE*1*1",
        f"IEA*1*{control}",
    ]
    return "~".join(body) + "~"


def _eligibility(args: dict[str, Any]) -> ToolRequest:
    raw = args.get("raw")
    if raw:
        if any(key in args for key in _FIELDS):
            raise ToolInputError({"raw": "give either raw or the fields, not both"})
        return ToolRequest("POST", "/270", headers={"Content-Type": MEDIA_TYPE}, content=str(raw).encode())
    missing = [key for key in ("member_id", "last_name", "first_name") if not args.get(key)]
    if missing:
        raise ToolInputError({key: "required unless raw is given" for key in missing})
    return ToolRequest(
        "POST", "/270", headers={"Content-Type": MEDIA_TYPE}, content=eligibility_270(args).encode()
    )


def _raw(endpoint: str) -> Any:
    return lambda args: ToolRequest(
        "POST", f"/{endpoint}", headers={"Content-Type": MEDIA_TYPE}, content=str(args["raw"]).encode()
    )


def _reply(response: ToolResponse) -> dict[str, Any]:
    return {"kind": response.headers.get("x-assay-x12-response", ""), "response": response.text}


_FIELDS: dict[str, dict[str, Any]] = {
    "member_id": string("The subscriber's member id (NM1*IL ... MI)"),
    "first_name": string("The subscriber's first name"),
    "last_name": string("The subscriber's last name"),
    "birth_date": string("The subscriber's date of birth, YYYY-MM-DD", pattern=_DATE),
    "service_date": string("The date of service asked about, YYYY-MM-DD", pattern=_DATE),
    "service_type": string("The service type code (EQ01), default 30 (health benefit plan coverage)"),
    "payer_id": string("The payer's id (NM1*PR ... PI), e.g. 842610001"),
    "payer_name": string("The payer's name, e.g. ACME HEALTH"),
    "provider_npi": string("The requesting provider's NPI (NM1*1P ... XX)"),
    "provider_name": string("The requesting provider's organisation name"),
    "trace_number": string("Your trace number (TRN02), echoed in the 271"),
    "sender_id": string("Your interchange sender id (ISA06), default ASSAYAGENT"),
}

_REPLY = obj(
    {
        "kind": {"type": "string", "description": "What the payer answered: 271, 277, 278, 999 or TA1"},
        "response": {"type": "string", "description": "The raw X12 reply (segments end with ~)"},
    },
    ["kind", "response"],
)

_RAW = string("The whole X12 interchange (ISA ... IEA), segments ending with ~", minLength=1)

TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="x12_eligibility",
        surface="x12",
        description="Ask the payer about a member's coverage (X12 270 → 271). Give the member's fields "
        "(member_id, first_name, last_name, birth_date, …) and the 270 is built for you, or give `raw`, a "
        "whole 270 interchange. Answers the raw 271 (or a 999/TA1 when the payer cannot read the request).",
        input_schema=obj({"raw": string("A whole 270 interchange instead of the fields"), **_FIELDS}),
        output_schema=_REPLY,
        build=_eligibility,
        read=_reply,
    ),
    AgentTool(
        name="x12_claim_status",
        surface="x12",
        description="Ask the payer about a claim's status (X12 276 → 277). Answers the raw 277 (or a 999/TA1).",
        input_schema=obj({"raw": _RAW}, ["raw"]),
        output_schema=_REPLY,
        build=_raw("276"),
        read=_reply,
    ),
    AgentTool(
        name="x12_prior_auth",
        surface="x12",
        description="Request a prior authorization from the payer (X12 278 request → 278 response). "
        "Answers the raw 278 response (or a 999/TA1).",
        input_schema=obj({"raw": _RAW}, ["raw"]),
        output_schema=_REPLY,
        build=_raw("278"),
        read=_reply,
    ),
)
