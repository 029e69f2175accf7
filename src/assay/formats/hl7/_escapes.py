"""Delimiters and escape sequences (HL7 v2.5.1 §2.5.4 and §2.7; docs/assertions.md).

Values are compared after decoding the delimiter escapes and hex data:

| sequence | means |
|---|---|
| `\\F\\` `\\S\\` `\\T\\` `\\R\\` `\\E\\` | field, component, subcomponent, repetition separator; escape character |
| `\\Xhhhh…\\` | hex data: bytes, read as UTF-8 (Latin-1 when they are not valid UTF-8) |

Formatting escapes (`\\H\\`, `\\N\\`, `\\.br\\`, `\\.sp\\`…), character-set escapes (`\\C…\\`,
`\\M…\\`), locally defined `\\Z…\\` and anything unrecognised are kept verbatim, as docs/assertions.md says.
Decoding is one left-to-right scan, linear in the input (hostile input).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import cached_property

__all__ = ["DEFAULT_DELIMITERS", "Delimiters", "escape", "unescape"]

_HEX_DIGITS = frozenset(string.hexdigits)


@dataclass(frozen=True)
class Delimiters:
    """The five delimiters a message declares in MSH-1 and MSH-2 (python-hl7's parse plan)."""

    field: str = "|"
    component: str = "^"
    repetition: str = "~"
    escape: str = "\\"
    subcomponent: str = "&"

    @cached_property
    def _decoded(self) -> dict[str, str]:
        return {
            "F": self.field,
            "S": self.component,
            "T": self.subcomponent,
            "R": self.repetition,
            "E": self.escape,
        }

    @cached_property
    def _encoding_table(self) -> dict[int, str]:
        esc = self.escape
        table = {ord(char): f"{esc}{letter}{esc}" for letter, char in self._decoded.items()}
        table[ord("\r")] = f"{esc}X0D{esc}"
        table[ord("\n")] = f"{esc}X0A{esc}"
        return table


DEFAULT_DELIMITERS = Delimiters()


def unescape(text: str, delimiters: Delimiters = DEFAULT_DELIMITERS) -> str:
    """Decode delimiter escapes and hex data in one value; keep every other sequence verbatim."""
    esc = delimiters.escape
    if esc not in text:
        return text
    decoded = delimiters._decoded
    parts: list[str] = []
    position = 0
    while True:
        start = text.find(esc, position)
        if start < 0:
            parts.append(text[position:])
            break
        end = text.find(esc, start + 1)
        if end < 0:
            parts.append(text[position:])
            break
        parts.append(text[position:start])
        body = text[start + 1 : end]
        value = decoded.get(body)
        if value is None and body[:1] == "X":
            value = _hex(body[1:])
        parts.append(text[start : end + 1] if value is None else value)
        position = end + 1
    return "".join(parts)


def _hex(digits: str) -> str | None:
    if not digits or len(digits) % 2 or not _HEX_DIGITS.issuperset(digits):
        return None
    data = bytes.fromhex(digits)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def escape(text: str, delimiters: Delimiters = DEFAULT_DELIMITERS) -> str:
    """Encode a value so it can sit inside a field: the inverse of `unescape`.

    Delimiters become `\\F\\ \\S\\ \\T\\ \\R\\ \\E\\`; CR and LF become hex data, since a raw line end
    would split the segment.
    """
    return text.translate(delimiters._encoding_table)
