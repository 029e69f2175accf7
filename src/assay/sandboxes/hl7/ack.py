"""The HL7v2 acknowledgment (docs/sandboxes.md), as a pure function of the message and a verdict.

An ACK is MSH + MSA (+ ERR on `AE`/`AR`), in the sender's own delimiters and version:

    MSH|^~\\&|<MSH-5>|<MSH-6>|<MSH-3>|<MSH-4>|<now>||ACK^<MSH-9.2>^ACK|<own id>|<MSH-11>|<MSH-12>
    MSA|AA|<MSH-10>
    ERR||<location>|<HL7 error code>^<text>^HL70357|E||||<what was wrong>

Sender and receiver are swapped (MSH-3/4 ↔ MSH-5/6), the control id is our own and MSA-2 echoes
the original's. `AA`: accepted. `AE`: parseable, but MSH-9, MSH-10 or MSH-12 is missing. `AR`:
unparseable, too large, an unknown receiving facility, or a task run that no longer takes traffic;
a message holding a NUL (U+0000) is refused `AR` 102 (it is not HL7 text, and PostgreSQL
could not store it); a message we could not read gets an ACK with our defaults (`|^~\\&`, version 2.5.1).
Error codes are HL7 table 0357 (v2.5 ERR-3).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from assay.formats.hl7 import (
    DEFAULT_DELIMITERS,
    Delimiters,
    Hl7Message,
    Hl7ParseError,
    escape,
    parse_header,
)

__all__ = [
    "MAX_MESSAGE_BYTES",
    "NUL_PROBLEM",
    "Ack",
    "Inspection",
    "acknowledge",
    "inspect",
    "reject",
    "too_large",
]

MAX_MESSAGE_BYTES = 1024 * 1024
"""An HL7 message is at most 1 MB."""

_EDGES = " \t\r\n\x0b\x1c\ufeff"
_EDGES_BYTES = b" \t\r\n\x0b\x1c\xef\xbb\xbf"
_REQUIRED = (("MSH.9", "message type"), ("MSH.10", "message control ID"), ("MSH.12", "version ID"))

# HL7 table 0357, message error condition codes.
REQUIRED_FIELD_MISSING = ("101", "Required field missing")
DATA_TYPE_ERROR = ("102", "Data type error")
UNKNOWN_KEY = ("204", "Unknown key identifier")
INTERNAL_ERROR = ("207", "Application internal error")

NUL_PROBLEM = "the message holds a NUL character (\\u0000), which is not HL7 text and cannot be stored"


@dataclass(frozen=True, slots=True)
class Inspection:
    """What reading an outbound message found, before routing it."""

    message: Hl7Message | None
    """The first message (of a batch, its first); None when unparseable."""
    text: str
    """The message as stored: framing and surrounding whitespace removed, CR segment ends."""
    problem: str | None = None
    """Why it is refused (`AR`) or in error (`AE`); None when it is well-formed."""
    code: str = "AA"
    error: tuple[str, str] | None = None
    location: str = ""

    @property
    def facility(self) -> str | None:
        """MSH-6.1, the receiving facility MLLP routes by."""
        if self.message is None:
            return None
        return self.message.read("MSH.6.1").value


@dataclass(frozen=True, slots=True)
class Ack:
    code: str
    """`AA`, `AE` or `AR` (MSA-1)."""
    text: str
    """The ACK message, CR segment ends, no framing."""
    control_id: str | None
    """The acknowledged message's MSH-10, when it had one."""


def _decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def inspect(raw: bytes | str) -> Inspection:
    """Check `raw` (one message, or a batch judged by its first) and find what is wrong with it.

    Every segment is checked as a full parse checks it, but only the header is parsed into a tree
    (`parse_header`): the check parses the whole message again when it judges it.
    """
    size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if size > MAX_MESSAGE_BYTES:
        return too_large(raw, size)
    text = _decode(raw).strip(_EDGES)
    try:
        header = parse_header(text.replace("\x00", "\ufffd"))
    except Hl7ParseError as exc:
        return Inspection(None, text, f"message cannot be parsed: {exc}", "AR", DATA_TYPE_ERROR)
    if "\x00" in text:
        # Refused on every backend alike (PostgreSQL text cannot hold a NUL), in the message's
        # own header's terms (NULs read as U+FFFD there), so the listener routes and logs it.
        return Inspection(header.message, "", NUL_PROBLEM, "AR", DATA_TYPE_ERROR)
    first, text = header.message, header.text
    for path, what in _REQUIRED:
        if not first.read(path).found:
            field = path.replace(".", "-")
            return Inspection(
                first, text, f"{field} ({what}) is missing", "AE", REQUIRED_FIELD_MISSING, f"MSH^1^{path[4:]}"
            )
    return Inspection(first, text)


def too_large(head: bytes | str, size: int) -> Inspection:
    """`AR` for a message of `size` bytes, over the 1 MB limit, of which `head` is the start (the
    MLLP listener keeps only the first MiB of such a frame). When its first segment is an MSH the
    refusal is in that header's terms: the ACK swaps its sender and receiver and echoes its control
    id, and the listener can route it by MSH-6.1 to log the refusal (`hl7_outbound`)."""
    try:
        message: Hl7Message | None = parse_header(_first_segment(head)).message
    except Hl7ParseError:
        message = None
    problem = f"message of {size} bytes is over the 1 MB limit"
    return Inspection(message, "", problem, "AR", INTERNAL_ERROR, "MSH")


def _first_segment(head: bytes | str) -> str:
    raw = (head.encode("utf-8") if isinstance(head, str) else head).lstrip(_EDGES_BYTES)
    ends = [i for i in (raw.find(b"\r"), raw.find(b"\n")) if i >= 0]
    return _decode(raw[: min(ends, default=len(raw))])


def reject(inspection: Inspection, problem: str, error: tuple[str, str] = INTERNAL_ERROR) -> Inspection:
    """The same message, refused (`AR`) for a routing reason (unknown facility, ended run)."""
    return Inspection(inspection.message, inspection.text, problem, "AR", error, "MSH^1^6")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S")


def _field(message: Hl7Message | None, path: str, default: str = "") -> str:
    if message is None:
        return default
    value = message.read(path).value
    return value if value is not None else default


def acknowledge(inspection: Inspection) -> Ack:
    """The ACK for `inspection` (docs/sandboxes.md)."""
    message = inspection.message
    delimiters: Delimiters = message.delimiters if message is not None else DEFAULT_DELIMITERS
    f, c = delimiters.field, delimiters.component

    def esc(value: str) -> str:
        return escape(value, delimiters)

    header = [
        "MSH",
        delimiters.component + delimiters.repetition + delimiters.escape + delimiters.subcomponent,
        esc(_field(message, "MSH.5.1", "ASSAY")),
        esc(_field(message, "MSH.6.1", "ASSAY")),
        esc(_field(message, "MSH.3.1")),
        esc(_field(message, "MSH.4.1")),
        _now(),
        "",
        c.join(("ACK", esc(_field(message, "MSH.9.2")), "ACK")),
        secrets.token_hex(10).upper(),
        esc(_field(message, "MSH.11.1", "P")),
        esc(_field(message, "MSH.12.1", "2.5.1")),
    ]
    control_id = _field(message, "MSH.10") or None
    segments = [f.join(header), f.join(("MSA", inspection.code, esc(control_id or "")))]
    if inspection.code != "AA" and inspection.error is not None:
        code, name = inspection.error
        problem = esc(inspection.problem or name)
        location = inspection.location.replace("^", c)
        segments.append(
            f.join(("ERR", "", location, c.join((code, name, "HL70357")), "E", "", "", "", problem))
        )
    return Ack(inspection.code, "\r".join(segments), control_id)
