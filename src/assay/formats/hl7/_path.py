"""`Hl7Path`: the HL7 path grammar of docs/assertions.md, parsed once into a frozen value.

```
path       = segment [ "[" occurrence "]" ] sep field [ "[" repetition "]" ]
             [ sep component [ sep subcomponent ] ]
segment    = ALPHA 2( ALPHA / DIGIT )          ; PID, OBX, ZPD (letters upper-cased)
sep        = "." / "-"                         ; PID.5.1, PID-5-1 and PID-5.1 are one path
occurrence, field, repetition, component, subcomponent = 1*DIGIT, at least 1
```

Numbering is the standard's, 1-based everywhere: `MSH.9` is the message type because MSH-1 is
the field separator itself. This differs from python-hl7's own `Accessor` on two counts, which is
why we keep our grammar: it numbers MSH fields one lower, and reads `PID.5.1` as field 5
repetition 1, where ours means component 1. Built when an assertion is validated (as python-hl7's
`Accessor.parse_key` is), so a bad path is a 422 and never a runtime surprise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from assay.formats.hl7._errors import Hl7PathError

__all__ = ["Hl7Path"]

_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9]{2}")
_OCCURRENCE = re.compile(r"\[(\d+)\]")
_SEPARATORS = re.compile(r"[.-]")
_FIELD = re.compile(r"(\d+)(?:\[(\d+)\])?")
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Hl7Path:
    """One position in a message: `SEG[occurrence].FIELD[repetition].COMPONENT.SUBCOMPONENT`.

    `component` and `subcomponent` are None when the path stops above them; reading such a path
    yields the repetition (or component) re-joined by `^` and `&` (docs/assertions.md).
    """

    segment: str
    field: int
    occurrence: int = 1
    repetition: int = 1
    component: int | None = None
    subcomponent: int | None = None

    def __post_init__(self) -> None:
        if not _SEGMENT.fullmatch(self.segment) or self.segment != self.segment.upper():
            raise Hl7PathError(str(self.segment), "segment ID must be three upper-case letters or digits")
        for value in (self.field, self.occurrence, self.repetition, self.component, self.subcomponent):
            if value is not None and (isinstance(value, bool) or value < 1):
                raise Hl7PathError(self._text(), "positions are 1-based and must be at least 1")
        if self.subcomponent is not None and self.component is None:
            raise Hl7PathError(self._text(), "a subcomponent needs a component")

    @classmethod
    def parse(cls, text: str) -> Hl7Path:
        """Parse a path string; raise `Hl7PathError` naming what is wrong. Cached per string."""
        if not isinstance(text, str):
            raise Hl7PathError(repr(text), "a path must be a string")
        return _parse(text)

    def __str__(self) -> str:
        return self._text()

    def _text(self) -> str:
        text = self.segment + (f"[{self.occurrence}]" if self.occurrence != 1 else "")
        text += f".{self.field}" + (f"[{self.repetition}]" if self.repetition != 1 else "")
        if self.component is not None:
            text += f".{self.component}"
        if self.subcomponent is not None:
            text += f".{self.subcomponent}"
        return text


@lru_cache(maxsize=4096)
def _parse(text: str) -> Hl7Path:
    source = text.strip()
    if not source:
        raise Hl7PathError(text, "the path is empty")
    if not _SEGMENT.match(source) or (len(source) > 3 and source[3].isalnum()):
        head = _SEPARATORS.split(source, maxsplit=1)[0].split("[", 1)[0]
        raise Hl7PathError(text, f"{head!r} is not a segment ID (a letter, then two letters or digits)")
    rest = source[3:]
    occurrence = 1
    bracket = _OCCURRENCE.match(rest)
    if bracket:
        occurrence = int(bracket.group(1))
        rest = rest[bracket.end() :]
    elif rest.startswith("["):
        raise Hl7PathError(text, "a segment occurrence is a number in brackets, e.g. OBX[2].5")
    if not rest:
        raise Hl7PathError(text, "a field number is required after the segment, e.g. PID.5")
    if rest[0] not in ".-":
        raise Hl7PathError(text, f"unexpected {rest[0]!r} after the segment")
    pieces = _SEPARATORS.split(rest[1:])
    if "" in pieces:
        raise Hl7PathError(text, "an empty position (two separators in a row, or one at the end)")
    if len(pieces) > 3:
        raise Hl7PathError(text, "too many parts: a path ends at the subcomponent")
    field = _FIELD.fullmatch(pieces[0])
    if not field:
        raise Hl7PathError(text, f"{pieces[0]!r} is not a field number (with an optional [repetition])")
    numbers: list[int | None] = [None, None]
    for index, piece in enumerate(pieces[1:]):
        if not _NUMBER.fullmatch(piece):
            name = ("component", "subcomponent")[index]
            raise Hl7PathError(text, f"{piece!r} is not a {name} number")
        numbers[index] = int(piece)
    try:
        return Hl7Path(
            segment=source[:3].upper(),
            field=int(field.group(1)),
            occurrence=occurrence,
            repetition=int(field.group(2)) if field.group(2) else 1,
            component=numbers[0],
            subcomponent=numbers[1],
        )
    except Hl7PathError as exc:
        raise Hl7PathError(text, exc.reason) from None
