"""`X12Path`: loop-aware paths into a transaction set, parsed once (docs/assertions.md).

Grammar (1-based; docs/assertions.md ``[LOOP/]...SEG[FILTER]...NN[~REPETITION][-COMPONENT]``)::

    path       = *(loop "/") segment *filter element ["~" repetition] ["-" component]
    loop       = 4DIGIT 0*2UPPER                 ; 2000C, 2010EA, 1000A
    segment    = UPPER 1*2(UPPER / DIGIT)        ; EB, NM1, N3
    filter     = "[" ("#" ordinal / qualifier) "]"
    element    = 2DIGIT / ("*" / "-" / ".") 1*2DIGIT   ; EB01, EB*01, EB-01, EB.1
    qualifier  = 1*(any character but "[" and "]"), not starting with "#"

Without a separator the element number takes exactly two digits, which keeps `N301` (N3, E01)
unambiguous. A loop prefix selects the segments of every instance of that loop and of its
descendant loops, in document order; prefixes chain. `[QUALIFIER]` keeps segments whose first
element equals it (whole, or its first component for a composite like `SV1*HC:99213`); `[#N]`
keeps the Nth remaining segment. The value read is from the first segment left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from assay.formats.x12._errors import X12PathError

if TYPE_CHECKING:
    from assay.formats.x12._loops import X12Loop
    from assay.formats.x12._model import X12Segment, X12TransactionSet

__all__ = ["X12Filter", "X12Path"]

_LOOP = re.compile(r"[0-9]{4}[A-Z]{0,2}")
_TAIL = re.compile(
    r"(?P<segment>[A-Z][A-Z0-9]{1,2}?)"
    r"(?P<filters>(?:\[[^\[\]]*\])*)"
    r"(?:[*.\-](?P<sep_element>[0-9]{1,2})|(?P<element>[0-9]{2}))"
    r"(?:~(?P<repetition>[0-9]+))?"
    r"(?:-(?P<component>[0-9]+))?"
)
_FILTER = re.compile(r"\[([^\[\]]*)\]")


@dataclass(frozen=True, slots=True)
class X12Filter:
    """`[QUALIFIER]` (qualifier set) or `[#N]` (ordinal set)."""

    qualifier: str | None = None
    ordinal: int | None = None

    def __str__(self) -> str:
        return f"[#{self.ordinal}]" if self.ordinal is not None else f"[{self.qualifier}]"


@dataclass(frozen=True, slots=True)
class X12Path:
    loops: tuple[str, ...]
    segment: str
    filters: tuple[X12Filter, ...]
    element: int
    repetition: int | None = None
    component: int | None = None

    @classmethod
    def parse(cls, text: str) -> X12Path:
        """Parse a path string; raise `X12PathError` naming the path and what is wrong."""
        if not isinstance(text, str):
            raise X12PathError(f"an X12 path must be a string, not {type(text).__name__}")
        return _parse(text.strip())

    def __str__(self) -> str:
        text = "".join(f"{loop}/" for loop in self.loops) + self.segment
        text += "".join(str(f) for f in self.filters) + f"{self.element:02d}"
        if self.repetition is not None:
            text += f"~{self.repetition}"
        if self.component is not None:
            text += f"-{self.component}"
        return text

    def select(self, transaction: X12TransactionSet) -> list[X12Segment]:
        """The segments left after the loop prefixes, the segment id and the filters."""
        found = [s for s in segments_in(transaction, self.loops) if s.id == self.segment]
        for one in self.filters:
            if one.ordinal is not None:
                found = found[one.ordinal - 1 : one.ordinal]
            else:
                found = [s for s in found if _qualifies(s, one.qualifier or "")]
        return found

    def read(self, transaction: X12TransactionSet) -> str | None:
        """The value at this path: from the first selected segment; None when absent or empty."""
        found = self.select(transaction)
        if not found:
            return None
        return found[0].value(self.element, self.repetition, self.component)


def segments_in(transaction: X12TransactionSet, loops: tuple[str, ...]) -> list[X12Segment]:
    """The segments of every instance of the chained loops (and their descendants), in order."""
    segments = transaction.segments
    if not loops:
        return segments
    selected: list[X12Loop] = [transaction.loops]
    for loop_id in loops:
        seen: set[int] = set()
        nxt: list[X12Loop] = []
        for parent in selected:
            for loop in parent.descendants():
                if loop.id == loop_id and id(loop) not in seen:
                    seen.add(id(loop))
                    nxt.append(loop)
        selected = nxt
    positions: set[int] = set()
    for loop in selected:
        positions.update(loop.all_positions())
    return [segments[p] for p in sorted(positions)]


def _qualifies(segment: X12Segment, qualifier: str) -> bool:
    first = segment.element(1)
    if first == qualifier:
        return True
    component = segment.delimiters.component
    return first.split(component, 1)[0] == qualifier or first.replace(component, ":") == qualifier


@lru_cache(maxsize=4096)
def _parse(text: str) -> X12Path:
    bracket = text.find("[")
    cut = text.rfind("/", 0, bracket if bracket >= 0 else len(text))
    loops = text[:cut].split("/") if cut >= 0 else []
    tail = text[cut + 1 :]
    for loop in loops:
        if not _LOOP.fullmatch(loop):
            raise X12PathError(
                f"invalid X12 path {text!r}: loop {loop!r} is not a loop id like 2000C or 2010EA"
            )
    match = _TAIL.fullmatch(tail)
    if match is None:
        raise X12PathError(
            f"invalid X12 path {text!r}: expected SEG[FILTER]...NN[~REP][-COMP] after the loops, "
            f"e.g. 2100C/NM1[IL]09 or EB03~2"
        )
    filters = tuple(_filter(text, raw) for raw in _FILTER.findall(match["filters"]))
    element = int(match["element"] or match["sep_element"])
    repetition = _positive(text, "repetition", match["repetition"])
    component = _positive(text, "component", match["component"])
    if element == 0:
        raise X12PathError(f"invalid X12 path {text!r}: element numbers start at 01")
    return X12Path(tuple(loops), match["segment"], filters, element, repetition, component)


def _filter(text: str, raw: str) -> X12Filter:
    if not raw:
        raise X12PathError(f"invalid X12 path {text!r}: empty filter []")
    if raw.startswith("#"):
        if not raw[1:].isdigit() or int(raw[1:]) == 0:
            raise X12PathError(f"invalid X12 path {text!r}: [{raw}] needs a positive number, like [#2]")
        return X12Filter(ordinal=int(raw[1:]))
    return X12Filter(qualifier=raw)


def _positive(text: str, name: str, raw: str | None) -> int | None:
    if raw is None:
        return None
    if int(raw) == 0:
        raise X12PathError(f"invalid X12 path {text!r}: {name} numbers start at 1")
    return int(raw)
