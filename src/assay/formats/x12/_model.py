"""The X12 envelope model: interchange (ISA/IEA) → functional groups (GS/GE) → transaction sets (ST/SE).

Segments keep their element strings exactly as split from the text (composites and repetitions
unsplit) with a reference to the interchange's `Delimiters`, so parsing stays one `split` per
segment and values are split only when read. Envelope problems — counts and control numbers that
disagree, a missing trailer — are `warnings` on the model, never exceptions (docs/assertions.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from assay.formats.x12._loops import X12Loop

__all__ = [
    "ACKNOWLEDGEMENTS",
    "DEFAULT_DELIMITERS",
    "Delimiters",
    "X12Document",
    "X12FunctionalGroup",
    "X12Interchange",
    "X12Segment",
    "X12TransactionSet",
]

ACKNOWLEDGEMENTS = frozenset({"997", "999", "TA1"})
"""Transaction set ids that acknowledge another interchange (never a check's candidate)."""


@dataclass(frozen=True, slots=True)
class Delimiters:
    """The four X12 delimiters of one interchange (X12.5; 005010 TR3 appendix B)."""

    element: str = "*"
    component: str = ":"
    repetition: str | None = "^"
    """None when the interchange declares none (004010's ISA11 `U`)."""
    segment: str = "~"

    def validate(self) -> None:
        """Raise `ValueError` unless the delimiters are distinct single non-alphanumeric characters."""
        chars = [self.element, self.component, self.segment]
        if self.repetition is not None:
            chars.append(self.repetition)
        for char in chars:
            if len(char) != 1 or char.isalnum() or (char.isspace() and char not in "\r\n"):
                raise ValueError(f"X12 delimiter {char!r} must be one non-alphanumeric, non-space character")
        if len(set(chars)) != len(chars):
            raise ValueError(f"X12 delimiters must be distinct, got {chars!r}")


DEFAULT_DELIMITERS = Delimiters()


class X12Segment(NamedTuple):
    """One segment: id, raw element strings (E01 first), the delimiters that split them.

    A named tuple rather than a frozen dataclass: equally immutable, and built with one
    `tuple.__new__` per segment, which keeps the tokenizer's inner loop cheap.
    """

    id: str
    elements: tuple[str, ...]
    delimiters: Delimiters = DEFAULT_DELIMITERS
    offset: int = -1
    """Character offset of the segment in the parsed text (-1 when built, not parsed)."""

    def element(self, position: int) -> str:
        """The raw text of element `position` (1-based); `""` when the segment is shorter."""
        return self.elements[position - 1] if 0 < position <= len(self.elements) else ""

    def repetitions(self, position: int) -> list[str]:
        raw = self.element(position)
        sep = self.delimiters.repetition
        return raw.split(sep) if sep and sep in raw else [raw]

    def components(self, position: int, repetition: int = 1) -> list[str]:
        reps = self.repetitions(position)
        if not 0 < repetition <= len(reps):
            return []
        return reps[repetition - 1].split(self.delimiters.component)

    def value(self, position: int, repetition: int | None = None, component: int | None = None) -> str | None:
        """The value a path `SEGnn[~rep][-comp]` reads; None when absent or empty (X12 sends no
        difference between the two). A composite read whole has its components joined by `:`."""
        reps = self.repetitions(position)
        index = repetition or 1
        if index > len(reps):
            return None
        chosen = reps[index - 1]
        comp = self.delimiters.component
        if component is not None:
            parts = chosen.split(comp)
            chosen = parts[component - 1] if component <= len(parts) else ""
        elif comp != ":" and comp in chosen:
            chosen = chosen.replace(comp, ":")
        return chosen or None

    def structure(self) -> tuple[tuple[tuple[str, ...], ...], ...]:
        """Elements as repetitions of components, independent of the delimiters (for comparing)."""
        return tuple(
            tuple(tuple(rep.split(self.delimiters.component)) for rep in self.repetitions(i + 1))
            for i in range(len(self.elements))
        )

    def __str__(self) -> str:
        return self.delimiters.element.join((self.id, *self.elements))


@dataclass(eq=False, repr=False)
class X12TransactionSet:
    """ST … SE: `segments` holds every segment from ST to SE inclusive, in order."""

    segments: list[X12Segment]
    group: X12FunctionalGroup | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def st(self) -> X12Segment:
        return self.segments[0]

    @property
    def se(self) -> X12Segment | None:
        last = self.segments[-1]
        return last if last.id == "SE" and len(self.segments) > 1 else None

    @property
    def code(self) -> str:
        """ST01, the transaction set identifier: `271`, `277`, `278`, `999`, …"""
        return self.st.element(1).strip()

    @property
    def control_number(self) -> str:
        return self.st.element(2).strip()

    @property
    def guide(self) -> str:
        """The implementation guide: ST03, else GS08 (e.g. `005010X279A1`)."""
        own = self.st.element(3).strip()
        if own or self.group is None or self.group.gs is None:
            return own
        return self.group.gs.element(8).strip()

    @cached_property
    def loops(self) -> X12Loop:
        """The loop tree (root = the transaction's header and trailer), resolved once."""
        from assay.formats.x12._loops import resolve_loops

        return resolve_loops(self)

    @property
    def interchange(self) -> X12Interchange | None:
        return self.group.interchange if self.group is not None else None

    def envelope_warnings(self) -> list[str]:
        """This set's warnings plus those of its functional group and interchange."""
        found = list(self.warnings)
        if self.group is not None:
            found.extend(self.group.warnings)
            if self.group.interchange is not None:
                found.extend(self.group.interchange.warnings)
        return found

    def __repr__(self) -> str:
        return f"<X12TransactionSet {self.code} {self.control_number} ({len(self.segments)} segments)>"


@dataclass(eq=False, repr=False)
class X12FunctionalGroup:
    """GS … GE. `gs` is None for transaction sets found outside any GS (a warning)."""

    gs: X12Segment | None
    transactions: list[X12TransactionSet] = field(default_factory=list)
    ge: X12Segment | None = None
    interchange: X12Interchange | None = None
    warnings: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        control = self.gs.element(6) if self.gs is not None else "?"
        return f"<X12FunctionalGroup {control} ({len(self.transactions)} transaction sets)>"


@dataclass(eq=False, repr=False)
class X12Interchange:
    """ISA … IEA. `other` keeps interchange-level segments outside groups (TA1 acknowledgements)."""

    isa: X12Segment
    groups: list[X12FunctionalGroup] = field(default_factory=list)
    iea: X12Segment | None = None
    other: list[X12Segment] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def delimiters(self) -> Delimiters:
        return self.isa.delimiters

    @property
    def control_number(self) -> str:
        return self.isa.element(13).strip()

    def transactions(self) -> Iterator[X12TransactionSet]:
        for group in self.groups:
            yield from group.transactions

    def segments(self) -> Iterator[X12Segment]:
        """Every segment in document order (TA1s after the ISA)."""
        yield self.isa
        yield from self.other
        for group in self.groups:
            if group.gs is not None:
                yield group.gs
            for transaction in group.transactions:
                yield from transaction.segments
            if group.ge is not None:
                yield group.ge
        if self.iea is not None:
            yield self.iea

    def __repr__(self) -> str:
        return f"<X12Interchange {self.control_number} ({len(self.groups)} groups)>"


@dataclass(eq=False, repr=False)
class X12Document:
    """Everything one text held: one or more interchanges."""

    interchanges: list[X12Interchange]
    warnings: list[str] = field(default_factory=list)

    def transactions(self) -> Iterator[X12TransactionSet]:
        for interchange in self.interchanges:
            yield from interchange.transactions()

    def segments(self) -> Iterator[X12Segment]:
        for interchange in self.interchanges:
            yield from interchange.segments()

    def all_warnings(self) -> list[str]:
        found = list(self.warnings)
        for interchange in self.interchanges:
            found.extend(interchange.warnings)
            for group in interchange.groups:
                found.extend(group.warnings)
                for transaction in group.transactions:
                    found.extend(transaction.warnings)
        return found

    def __repr__(self) -> str:
        return f"<X12Document ({len(self.interchanges)} interchanges)>"
