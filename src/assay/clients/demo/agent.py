"""The reference agent of `assay demo`: a script, not a model, that works each "front office" task
through the sandbox's real protocols — FHIR REST, HL7 v2 over MLLP, X12 over HTTP, SFTP, the
payer portal's REST API, voice turns and a call to the payer's phone line — using only what `start` returned (endpoints and
credentials) and the run token. It gets most things right and two things wrong on purpose (a
transposed phone number; a call that never asks for the date of birth), so the drill-down has
something to show.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "ACTIONS",
    "MEMBER_CALL_TURNS",
    "NEW_PHONE",
    "PAYER_CALL",
    "PRIOR_AUTH_REQUEST",
    "REFERRAL",
    "AgentContext",
    "RetryUnavailable",
    "act",
    "adt_a08",
    "appointment",
    "call_note",
    "copy_referral",
]

MLLP_START, MLLP_END = b"\x0b", b"\x1c\x0d"


class RetryUnavailable(httpx.HTTPTransport):
    """Sends a request again after a `503` (the database restarting, saturation) or `429`, waiting
    the answer's `Retry-After`, as a well-behaved agent does: at most `attempts` times, and only
    while the wait asked for is at most `longest` seconds (else the 503 is the answer)."""

    def __init__(self, attempts: int = 5, longest: float = 10.0, **options: Any) -> None:
        super().__init__(**options)
        self.attempts, self.longest = attempts, longest

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(self.attempts):
            response = super().handle_request(request)
            if response.status_code not in (429, 503):
                return response
            try:
                wait = float(response.headers.get("retry-after", ""))
            except ValueError:
                return response
            if wait > self.longest:
                return response
            response.close()
            time.sleep(wait)
        return super().handle_request(request)


@dataclass
class AgentContext:
    http: httpx.Client
    """Bound to the Assay base URL, carrying the run token."""
    endpoints: dict[str, str]
    credentials: dict[str, Any]
    notes: list[str]
    """What the agent did, one line per action, for the demo's narration."""

    def url(self, endpoint: str, suffix: str = "") -> str:
        return self.endpoints[endpoint] + suffix

    def ok(self, response: httpx.Response, what: str) -> httpx.Response:
        response.raise_for_status()
        self.notes.append(f"{what} → {response.status_code}")
        return response


def appointment(patient: str, doctor: str) -> dict[str, Any]:
    """The follow-up the agent books, for the ids its searches found."""
    return {
        "resourceType": "Appointment",
        "status": "booked",
        "start": "2026-12-03T09:00:00Z",
        "end": "2026-12-03T09:30:00Z",
        "minutesDuration": 30,
        "participant": [
            {"actor": {"reference": f"Practitioner/{doctor}", "display": "Dr. Rivera"}, "status": "accepted"},
            {"actor": {"reference": f"Patient/{patient}", "display": "John Smith"}, "status": "accepted"},
        ],
    }


def book_follow_up(ctx: AgentContext) -> None:
    fhir = {"Content-Type": "application/fhir+json"}
    found = ctx.ok(
        ctx.http.get(ctx.url("fhir", "/Patient"), params={"name": "Smith"}), "FHIR search Patient?name=Smith"
    )
    patient = found.json()["entry"][0]["resource"]["id"]
    doctors = ctx.ok(
        ctx.http.get(ctx.url("fhir", "/Practitioner"), params={"name": "Rivera"}),
        "FHIR search Practitioner?name=Rivera",
    )
    doctor = doctors.json()["entry"][0]["resource"]["id"]
    ctx.ok(
        ctx.http.post(ctx.url("fhir", "/Appointment"), json=appointment(patient, doctor), headers=fhir),
        "FHIR create Appointment",
    )


NEW_PHONE = "555-0124"
"""The deliberate slip: two digits of 555-0142 transposed."""


def update_phone(ctx: AgentContext) -> None:
    patient = ctx.ok(
        ctx.http.get(ctx.url("fhir", "/Patient/john-smith")), "FHIR read Patient/john-smith"
    ).json()
    patient["telecom"][0]["value"] = NEW_PHONE
    headers = {"Content-Type": "application/fhir+json"}
    ctx.ok(
        ctx.http.put(ctx.url("fhir", "/Patient/john-smith"), json=patient, headers=headers),
        "FHIR update Patient",
    )


def adt_a08(facility: str, control: str = "FO0001") -> list[str]:
    """The ADT^A08 the lab system is sent, segment by segment (`control`: its MSH-10)."""
    return [
        f"MSH|^~\\&|FRONTDESK|CLINIC|LAB|{facility}|20261126090000||ADT^A08|{control}|P|2.5.1",
        "EVN|A08|20261126090000",
        "PID|1||M123456^^^ACME^MB||SMITH^JOHN||19620417|M|||||555-0142",
    ]


def send_mllp(host: str, port: int, message: str, timeout: float = 10) -> bytes:
    """`message` (segments joined by CR) sent in one MLLP frame on a new connection; the framed
    reply. ConnectionError when the peer closes before a whole frame came back."""
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(MLLP_START + message.encode() + MLLP_END)
        reply = b""
        while not reply.endswith(MLLP_END):
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError("MLLP connection closed before the ACK")
            reply += chunk
    return reply


def notify_lab(ctx: AgentContext) -> None:
    hl7 = ctx.credentials["hl7"]
    message = "\r".join(adt_a08(hl7["receiving_facility"]))
    reply = send_mllp(hl7["host"], int(hl7["port"]), message)
    ack = reply.strip(b"\x0b\x1c\r").decode(errors="replace")
    code = next((line.split("|")[1] for line in ack.split("\r") if line.startswith("MSA|")), "?")
    ctx.notes.append(f"MLLP ADT^A08 to {hl7['host']}:{hl7['port']} → ACK {code}")
    if code != "AA":
        raise RuntimeError(f"the lab system did not accept the ADT^A08: {ack!r}")


ELIGIBILITY_270 = (
    "ISA*00*          *00*          *ZZ*FRONTOFFICE    *ZZ*ACMEHEALTH     *261126*0900*^*00501*000000101*0*T*:~"
    "GS*HS*FRONTOFFICE*ACMEHEALTH*20261126*0900*101*X*005010X279A1~"
    "ST*270*0001*005010X279A1~"
    "BHT*0022*13*FO-ELIG-1*20261126*0900~"
    "HL*1**20*1~NM1*PR*2*ACME HEALTH*****PI*842610001~"
    "HL*2*1*21*1~NM1*1P*2*FRONT OFFICE CLINIC*****XX*1234567893~"
    "HL*3*2*22*0~TRN*1*FO-TRACE-1*9FRONTOFFC~"
    "NM1*IL*1*SMITH*JOHN****MI*M123456~DMG*D8*19620417~DTP*291*D8*20261203~EQ*30~"
    "SE*13*0001~GE*1*101~IEA*1*000000101~"
)


def check_eligibility(ctx: AgentContext) -> None:
    answer = ctx.ok(
        ctx.http.post(
            ctx.url("x12", "/270"), content=ELIGIBILITY_270, headers={"Content-Type": "application/edi-x12"}
        ),
        "X12 270 eligibility inquiry",
    )
    if "EB*1" not in answer.text:
        ctx.notes.append("271 reports no active coverage")


REFERRAL = ("inbox/referrals/smith-cardiology.txt", "outbox/cardiology/smith-cardiology.txt")
"""Where the referral letter is, and where the agent files it."""


@asynccontextmanager
async def sftp_session(sftp: Mapping[str, Any]) -> AsyncIterator[Any]:
    """An SFTP client logged in with a task run's `sftp` credentials (host, port, username,
    password); the connection closes with the block."""
    import asyncssh

    async with (
        asyncssh.connect(
            sftp["host"],
            port=int(sftp["port"]),
            username=sftp["username"],
            password=sftp["password"],
            known_hosts=None,
        ) as conn,
        conn.start_sftp_client() as client,
    ):
        yield client


async def copy_referral(sftp: Mapping[str, Any]) -> None:
    """The referral letter copied from the inbox to the cardiology outbox over SFTP, as an agent
    with the task run's `sftp` credentials does it (also what the task-run benchmark sends)."""
    async with sftp_session(sftp) as client:
        async with client.open(REFERRAL[0], "rb") as source:
            letter = await source.read()
        await client.makedirs(REFERRAL[1].rpartition("/")[0], exist_ok=True)
        async with client.open(REFERRAL[1], "wb") as target:
            await target.write(letter)


def file_referral(ctx: AgentContext) -> None:
    sftp = ctx.credentials["sftp"]
    asyncio.run(copy_referral(sftp))
    ctx.notes.append(f"SFTP {sftp['host']}:{sftp['port']} copied the referral to outbox/cardiology/")


PRIOR_AUTH_REQUEST = {
    "patient": {"member_id": "M123456", "name": "John Smith", "birth_date": "1962-04-17"},
    "provider": {"npi": "1234567893", "name": "Front Office Clinic"},
    "procedure_code": "93306",
    "diagnosis_codes": ["R07.89"],
    "service_date": "2026-12-10",
}


def prior_auth(ctx: AgentContext) -> None:
    answer = ctx.ok(
        ctx.http.post(ctx.url("portal", "/prior_auth_requests"), json=PRIOR_AUTH_REQUEST),
        "portal POST prior_auth_requests",
    )
    ctx.notes.append(f"portal decided: {answer.json().get('status')}")


MEMBER_CALL_TURNS = [
    {"speaker": "agent", "text": "Hello, this is the Front Office Clinic calling for John Smith."},
    {"speaker": "caller", "text": "Speaking."},
    {"speaker": "agent", "text": "Before we go on, could you confirm your member ID?"},
    {"speaker": "caller", "text": "It's M123456."},
    # the deliberate slip: the agent never asks for the date of birth
    {"speaker": "agent", "text": "Thank you. You're booked with Dr. Rivera on December 3rd at 9 AM."},
]


def call_member(ctx: AgentContext) -> None:
    turns = MEMBER_CALL_TURNS
    ctx.ok(ctx.http.post(ctx.url("voice", "/turns"), json=turns), f"voice: {len(turns)} turns")


PAYER_CALL: list[tuple[str, str]] = [
    ("dtmf", "3"),  # authorization
    ("dtmf", "1234567893"),  # the NPI
    ("dtmf", "1"),  # confirm the read-back
    ("say", "M 1 2 3 4 5 6"),  # the member ID
    ("dtmf", "1"),  # confirm
    ("dtmf", "04171962"),  # the date of birth
    ("dtmf", "1"),  # confirm (then the hold)
    ("say", "Hi, this is Front Office Clinic."),
    ("say", "What is the status of the prior authorization for procedure 70551?"),
    ("say", "May I have the call reference number? That's all, thank you, goodbye."),
]
"""The call to the payer's phone line, after dialling: keys pressed (`dtmf`) and words said (`say`);
the reference number is in the representative's last answer."""


def call_note(reference: str) -> dict[str, str]:
    """The portal note the agent files about the call."""
    return {"note_id": "CALL-1", "member_id": "M123456", "reference": reference, "topic": "PA 70551"}


def call_payer(ctx: AgentContext) -> None:
    calls = ctx.url("voice", "/calls")
    number = ctx.credentials["voice"]["phone_number"]
    call = calls + "/" + ctx.ok(ctx.http.post(calls, json={"to": number}), f"dial {number}").json()["call_id"]
    for kind, value in PAYER_CALL:
        body = {"digits": value} if kind == "dtmf" else {"text": value}
        what = f"keys {value}" if kind == "dtmf" else f"say {value!r}"
        answer = ctx.ok(ctx.http.post(f"{call}/{kind}", json=body), what).json()
    reference = next(turn["text"] for turn in answer["said"] if turn["kind"] == "reference")
    ctx.ok(
        ctx.http.post(ctx.url("portal", "/call_notes"), json=call_note(reference)),
        f"portal POST call_notes ({reference})",
    )


ACTIONS: dict[str, Callable[[AgentContext], None]] = {
    "Book a follow-up with Dr. Rivera": book_follow_up,
    "Record John Smith's new phone number": update_phone,
    "Tell the lab system about the update (HL7 ADT^A08)": notify_lab,
    "Check John Smith's eligibility (X12 270/271)": check_eligibility,
    "File the cardiology referral on the SFTP drop": file_referral,
    "Request prior authorization for the echocardiogram": prior_auth,
    "Call John Smith to confirm the visit": call_member,
    "Ask ACME Health by phone about the MRI authorization": call_payer,
}
"""Task name → what the agent does for it."""


def act(task_name: str, ctx: AgentContext) -> None:
    ACTIONS[task_name](ctx)
