"""X12 tokenizer: text → delimiters and segments, one interchange header at a time.

Delimiters are read from each ISA header once into a `Delimiters` plan (as python-hl7's `create_parse_plan`
does), as X12.5 / the 005010 TR3 appendix B define them:

* element separator — the character right after `ISA`;
* repetition separator — ISA11 (005010 and later; `U` in 004010 is a standards id, not a
  separator, so alphanumeric ISA11 means "no repetitions");
* component separator — ISA16;
* segment terminator — the character right after ISA16.

Real files bend the fixed-width rule (fields trimmed of padding, ISA08 broken by a line feed), so
ISA16 is located by counting 16 element separators rather than by byte 104. Line breaks (CR, LF,
CRLF) and spaces between segments, a leading BOM and trailing whitespace are tolerated.

Linear time on any input: every character is visited a bounded number of times (one `str.find`
per segment from the current position, one `split` per segment); the ISA scan is capped at
`_ISA_SCAN_LIMIT` characters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from assay.formats.x12._errors import X12ParseError
from assay.formats.x12._model import Delimiters, X12Segment

__all__ = ["tokenize"]

_ISA_SCAN_LIMIT = 512
_WHITESPACE = " \t\r\n\f\v"
_LINE_BREAKS = "\r\n"


def tokenize(text: str, *, strict: bool = True) -> Iterator[X12Segment]:
    """Yield every segment of `text` (which may hold several interchanges), in order.

    `strict=False` keeps a segment whose id is not 2–3 upper-case letters or digits (its id is
    the raw text before the first element separator), so a receiver can name it in a 999 IK3
    instead of refusing the whole interchange.

    Raises:
        X12ParseError: the text does not start with an ISA header, a header's delimiters cannot
            be read, or (strict) a segment id is not 2–3 upper-case letters or digits.
    """
    length = len(text)
    pos = length - len(text.lstrip(_WHITESPACE + "\ufeff"))
    if pos >= length:
        raise X12ParseError("empty input: expected an X12 interchange starting with ISA", offset=0)
    if not text.startswith("ISA", pos):
        raise X12ParseError(
            f"input does not start with an ISA interchange header (found {text[pos : pos + 20]!r})",
            segment=0,
            offset=_byte_offset(text, pos),
        )
    header, delimiters, pos = _read_isa(text, pos, 0)
    yield header
    index = 1
    terminator, separator = delimiters.segment, delimiters.element
    find, make, known = text.find, tuple.__new__, _KNOWN_IDS
    while pos < length:
        stop = find(terminator, pos)
        if stop < 0:
            stop = length
        raw = text[pos:stop]
        body = raw.lstrip(_WHITESPACE).rstrip(_LINE_BREAKS)
        if body:
            start = pos + len(raw) - len(raw.lstrip(_WHITESPACE)) if body[0] != raw[0] else pos
            if body.startswith("ISA"):
                header, delimiters, pos = _read_isa(text, start, index)
                terminator, separator = delimiters.segment, delimiters.element
                yield header
                index += 1
                continue
            parts = body.split(separator)
            seg_id = parts[0]
            if seg_id not in known and (strict or _is_segment_id(seg_id)):
                _check_segment_id(text, seg_id, index, start)
            yield make(X12Segment, (seg_id, tuple(parts[1:]), delimiters, start))
            index += 1
        pos = stop + 1


_KNOWN_IDS: set[str] = set()
"""Segment ids already validated (a bounded set: at most 36**3 ids can pass the check)."""


def _check_segment_id(text: str, seg_id: str, index: int, start: int) -> None:
    if not _is_segment_id(seg_id):
        raise X12ParseError(
            f"bad segment identifier {seg_id[:20]!r}: expected 2-3 upper-case letters or digits",
            segment=index,
            element=0,
            offset=_byte_offset(text, start),
        )
    _KNOWN_IDS.add(seg_id)


class _Header(NamedTuple):
    isa: X12Segment
    delimiters: Delimiters
    next_position: int
    """Where the segment after the ISA begins (just past the terminator)."""


def _read_isa(text: str, start: int, index: int) -> _Header:
    """Read one ISA header at `start`: its delimiters, the segment, and where the next begins."""
    if start + 4 > len(text):
        raise X12ParseError("truncated ISA header", segment=index, offset=_byte_offset(text, start))
    element = text[start + 3]
    if element.isalnum() or element in _WHITESPACE:
        raise X12ParseError(
            f"ISA header: element separator {element!r} is not a delimiter character",
            segment=index,
            element=0,
            offset=_byte_offset(text, start + 3),
        )
    limit = min(len(text), start + _ISA_SCAN_LIMIT)
    cursor = start + 3
    for count in range(1, 16):
        cursor = text.find(element, cursor + 1, limit)
        if cursor < 0:
            raise X12ParseError(
                f"ISA header: found only {count} of 16 element separators {element!r}",
                segment=index,
                element=count,
                offset=_byte_offset(text, start),
            )
    component_at = cursor + 1
    if component_at + 1 >= len(text):
        raise X12ParseError(
            "ISA header ends before ISA16 and the segment terminator",
            segment=index,
            element=16,
            offset=_byte_offset(text, start),
        )
    component, terminator = text[component_at], text[component_at + 1]
    if component.isalnum() or component in _WHITESPACE or component == element:
        raise X12ParseError(
            f"ISA16 component separator {component!r} is not a delimiter character",
            segment=index,
            element=16,
            offset=_byte_offset(text, component_at),
        )
    if terminator.isalnum() or terminator in (element, component, " "):
        raise X12ParseError(
            f"ISA header: no segment terminator after ISA16 (found {terminator!r})",
            segment=index,
            element=16,
            offset=_byte_offset(text, component_at + 1),
        )
    fields = [part.strip(_LINE_BREAKS) for part in text[start + 4 : component_at].split(element)]
    fields[-1] = component
    repetition = fields[10].strip()
    usable = len(repetition) == 1 and not repetition.isalnum() and repetition not in (component, terminator)
    delimiters = Delimiters(element, component, repetition if usable else None, terminator)
    isa = X12Segment("ISA", tuple(fields), delimiters, start)
    return _Header(isa, delimiters, component_at + 2)


def _is_segment_id(seg_id: str) -> bool:
    return (
        2 <= len(seg_id) <= 3
        and seg_id.isascii()
        and seg_id.isalnum()
        and seg_id == seg_id.upper()
        and seg_id[0].isalpha()
    )


def _byte_offset(text: str, pos: int) -> int:
    """Byte offset in the UTF-8 encoding of `text` (only computed when reporting an error)."""
    prefix = text[:pos]
    return pos if prefix.isascii() else len(prefix.encode("utf-8"))
