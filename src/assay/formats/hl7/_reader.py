"""Raw input → messages: normalise, split batches, read delimiters, parse with python-hl7.

What real senders produce (docs/assertions.md) and what this accepts:

- Segment ends CR, LF or CRLF, normalised to CR before python-hl7 sees them; blank lines dropped.
- A leading UTF-8 byte-order mark and stray MLLP frame bytes (0x0B, 0x1C) are skipped; bytes are
  read as UTF-8, or Latin-1 when they are not valid UTF-8.
- FHS/BHS/BTS/FTS envelopes: every `MSH…` run is its own message. Like python-hl7's
  `parse_batch`/`parse_file`, an FHS after the first segment, a BHS inside an open batch, and a
  segment before any MSH are errors.
- MSH-1/MSH-2 declare the delimiters, checked once here into a `Delimiters` plan (as python-hl7's
`create_parse_plan` does).

Every problem is an `Hl7ParseError` carrying the 1-based segment number; python-hl7 is called in
exactly one place and anything it raises is translated there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import hl7

from assay.formats.hl7._errors import Hl7ParseError
from assay.formats.hl7._escapes import Delimiters
from assay.formats.hl7._message import Hl7Message

__all__ = ["Hl7Header", "parse_header", "parse_message", "parse_messages"]

_SEGMENT_ID = re.compile(r"[A-Z][A-Z0-9]{2}")
_HEADERS = frozenset({"MSH", "BHS", "FHS"})
_TRAILERS = frozenset({"BTS", "FTS"})
_FRAMING = " \t\r\n\x0b\x1c\ufeff"


def parse_messages(raw: str | bytes) -> list[Hl7Message]:
    """Every message in `raw`: one, or each of a batch or file, in order.

    Raises:
        Hl7ParseError: empty input, no MSH, a truncated or invalid MSH, a bad segment ID, or a
            malformed batch envelope; the error names the segment where it was found.
    """
    lines = _segments(_text(raw))
    if not lines:
        raise Hl7ParseError("empty input: no HL7 segments")
    return [
        _parse(group, start, delimiters, position)
        for position, (start, delimiters, group) in enumerate(_group(lines), 1)
    ]


def parse_message(raw: str | bytes) -> Hl7Message:
    """Exactly one message; a batch of several is an `Hl7ParseError`."""
    messages = parse_messages(raw)
    if len(messages) != 1:
        raise Hl7ParseError(f"expected one message, found a batch of {len(messages)}")
    return messages[0]


@dataclass(frozen=True, slots=True)
class Hl7Header:
    """The first message's MSH, parsed, and the whole input normalised (CR segment ends)."""

    message: Hl7Message
    """A message of the MSH segment alone: `read("MSH.10")` and friends work on it."""
    text: str
    """Every segment of the input, in order, joined by CR."""
    count: int
    """How many messages the input holds (a batch holds several)."""


def parse_header(raw: str | bytes) -> Hl7Header:
    """What an acknowledgment needs, at a tenth of a full parse's cost (docs/performance.md, MLLP).

    Every segment is checked exactly as `parse_messages` checks it (segment IDs, MSH-1/MSH-2
    delimiters, batch envelopes); only the first MSH is handed to python-hl7, since its tree of
    the other segments is what costs and an ACK reads the header only.

    Raises:
        Hl7ParseError: as `parse_messages`.
    """
    lines = _segments(_text(raw))
    if not lines:
        raise Hl7ParseError("empty input: no HL7 segments")
    groups = _group(lines)
    start, delimiters, group = groups[0]
    return Hl7Header(_parse(group[:1], start, delimiters, 1), "\r".join(lines), len(groups))


def _text(raw: str | bytes) -> str:
    if isinstance(raw, str):
        return raw.strip(_FRAMING)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return text.strip(_FRAMING)


def _segments(text: str) -> list[str]:
    lines = text.replace("\r\n", "\r").replace("\n", "\r").split("\r")
    return [line for line in (raw.strip() for raw in lines) if line]


def _group(lines: list[str]) -> list[tuple[int, Delimiters, list[str]]]:
    """Split segments into messages: (1-based number of the MSH, its delimiters, the message's
    segments)."""
    groups: list[tuple[int, Delimiters, list[str]]] = []
    current: list[str] | None = None
    in_batch = False
    field = "|"
    for number, line in enumerate(lines, 1):
        segment_id = line[:3]
        if segment_id in _HEADERS:
            delimiters = _delimiters(line, number)
            field = delimiters.field
        elif not _SEGMENT_ID.fullmatch(segment_id) or (len(line) > 3 and line[3] != field):
            bad = line.split(field, 1)[0][:20]
            raise Hl7ParseError(
                f"{bad!r} is not a segment ID (three upper-case letters or digits, then {field!r})",
                segment=number,
            )
        if segment_id == "MSH":
            current = [line]
            groups.append((number, delimiters, current))
        elif segment_id == "FHS" and number != 1:
            raise Hl7ParseError(
                "a file header (FHS) may only be the first segment", segment=number, segment_id="FHS"
            )
        elif segment_id == "BHS":
            if in_batch:
                raise Hl7ParseError(
                    "a batch header (BHS) inside an open batch", segment=number, segment_id="BHS"
                )
            in_batch, current = True, None
        elif segment_id in _TRAILERS:
            in_batch = in_batch and segment_id != "BTS"
            current = None
        elif segment_id != "FHS":
            if current is None:
                raise Hl7ParseError(
                    f"{segment_id} segment before any message header (MSH)",
                    segment=number,
                    segment_id=segment_id,
                )
            current.append(line)
    if not groups:
        raise Hl7ParseError("no message header (MSH): not an HL7v2 message")
    return groups


def _delimiters(line: str, number: int) -> Delimiters:
    """MSH-1 and MSH-2 (or the FHS/BHS equivalents) as a delimiter plan, validated."""
    header = line[:3]

    def fail(reason: str) -> Hl7ParseError:
        return Hl7ParseError(f"{header} is truncated or invalid: {reason}", segment=number, segment_id=header)

    if len(line) < 4:
        raise fail(f"no field separator ({header}-1)")
    field = line[3]
    end = line.find(field, 4)
    encoding = line[4:] if end < 0 else line[4:end]
    if not encoding:
        raise fail(f"no encoding characters ({header}-2)")
    if len(encoding) > 5:
        raise fail(f"{header}-2 {encoding[:10]!r} has more than 5 encoding characters")
    if end < 0:
        raise fail(f"nothing after {header}-2")
    defaults = "^~\\&"
    chars = field + encoding[:4] + defaults[len(encoding[:4]) :]
    if any(c.isalnum() or c.isspace() for c in chars) or len(set(chars)) != 5:
        raise fail(f"delimiters {field + encoding!r} must be five distinct non-alphanumeric characters")
    return Delimiters(
        field=chars[0], component=chars[1], repetition=chars[2], escape=chars[3], subcomponent=chars[4]
    )


class _ListFactory:
    """python-hl7 containers as plain lists: we read the tree by index only, never through its
    container methods, and skipping their construction halves python-hl7's parse time
    (docs/performance.md, "HL7v2")."""

    # Five distinct functions: python-hl7 recognises the segment level by comparing them.
    @staticmethod
    def create_message(sequence: list[Any], **_: Any) -> list[Any]:
        return sequence

    @staticmethod
    def create_segment(sequence: list[Any], **_: Any) -> list[Any]:
        return sequence

    @staticmethod
    def create_field(sequence: list[Any], **_: Any) -> list[Any]:
        return sequence

    @staticmethod
    def create_repetition(sequence: list[Any], **_: Any) -> list[Any]:
        return sequence

    @staticmethod
    def create_component(sequence: list[Any], **_: Any) -> list[Any]:
        return sequence


def _parse(lines: list[str], start: int, delimiters: Delimiters, position: int) -> Hl7Message:
    text = "\r".join(lines)
    try:
        tree = hl7.parse(text, factory=_ListFactory)
    except Exception as exc:  # the one boundary where python-hl7 errors become ours
        raise Hl7ParseError(f"python-hl7 could not parse the message: {exc}", segment=start) from exc
    return Hl7Message(tree, [line[:3] for line in lines], delimiters, text, position)
