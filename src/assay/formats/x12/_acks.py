"""Acknowledgements: the TA1 interchange acknowledgement and the 999 (005010X231A1).

`envelope_problem` applies X12.5's interchange rules a receiver must enforce before it reads
anything inside (fixed ISA widths and code values, a matching IEA) and names the TA1 note code
(TA105) for the first one broken. `build_ta1` and `build_999` write the acknowledgements; the
999's IK3/IK4 name the segment (id, position counted from ST = 1, loop) and the element
(position, component) of each error, with the X231A1 code lists' values:

* IK304 segment syntax error: 1 unrecognized segment id, 2 unexpected segment, 3 required
  segment missing, 5 segment exceeds maximum use, 8 segment has data element errors.
* IK403 element syntax error: 1 mandatory element missing, 2 conditional element missing,
  3 too many elements, 4 too short, 5 too long, 6 invalid character, 7 invalid code value,
  8 invalid date, 9 invalid time.
* IK5 transaction set: A accepted, R rejected; IK502 1 not supported, 2 trailer missing,
  3 ST02/SE02 disagree, 4 SE01 count wrong, 5 segments in error.
* AK9 functional group: A, P (partially accepted), R; AK905 3 trailer missing, 4 GS06/GE02
  disagree, 5 GE01 count wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from assay.formats.x12._model import X12Interchange, X12Segment, X12TransactionSet
from assay.formats.x12._writer import build_segment, build_transaction

__all__ = [
    "ElementError",
    "EnvelopeProblem",
    "GroupAck",
    "SegmentError",
    "TransactionAck",
    "build_999",
    "build_ta1",
    "envelope_problem",
]

_ISA_WIDTHS = (2, 10, 2, 10, 2, 15, 2, 15, 6, 4, 1, 5, 9, 1, 1, 1)
_WIDTH_CODES = ("010", "011", "012", "013", "005", "006", "007", "008",
                "014", "015", "016", "017", "018", "019", "020", "027")  # fmt: skip
"""TA105 note code per ISA element (ISA01 invalid authorization qualifier … ISA16 component separator)."""
_ID_QUALIFIERS = frozenset({"01", "14", "20", "27", "28", "29", "30", "33", "ZZ"})
_ISA_CODES: dict[int, frozenset[str]] = {
    1: frozenset({"00", "03"}),
    3: frozenset({"00", "01"}),
    5: _ID_QUALIFIERS,
    7: _ID_QUALIFIERS,
    12: frozenset({"00501"}),
    14: frozenset({"0", "1"}),
    15: frozenset({"P", "T"}),
}
_SAFE = re.compile(r"[A-Za-z0-9 .,\-/()#&'@!%+=?_]*")
"""Characters a copied bad value (IK404) may carry through any delimiters we write with."""


@dataclass(frozen=True, slots=True)
class EnvelopeProblem:
    """Why an interchange is refused as a whole: the TA105 note code and a sentence."""

    code: str
    message: str


def envelope_problem(interchange: X12Interchange, *, trailing: bool = False) -> EnvelopeProblem | None:
    """The first X12.5 interchange rule `interchange` breaks, or None.

    `trailing` says that something other than another interchange followed the IEA (TA1 024).
    """
    fields = interchange.isa.elements
    if len(fields) != 16:
        return EnvelopeProblem("022", f"ISA has {len(fields)} elements, expected 16")
    for index, (value, width) in enumerate(zip(fields, _ISA_WIDTHS, strict=True)):
        if len(value) != width:
            name = f"ISA{index + 1:02d}"
            return EnvelopeProblem(
                _WIDTH_CODES[index], f"{name} is {len(value)} characters wide, expected exactly {width}"
            )
    problem = _isa_values(fields)
    if problem is not None:
        return problem
    iea = interchange.iea
    if iea is None:
        return EnvelopeProblem("023", "the interchange ends without an IEA trailer (truncated?)")
    if iea.element(2).strip() != fields[12]:
        return EnvelopeProblem("001", f"IEA02 {iea.element(2).strip()!r} does not match ISA13 {fields[12]!r}")
    declared = iea.element(1).strip()
    if not declared.isdigit() or int(declared) != len(interchange.groups):
        return EnvelopeProblem(
            "021",
            f"IEA01 says {declared!r} functional groups, the interchange holds {len(interchange.groups)}",
        )
    if interchange.other or trailing or any(group.gs is None for group in interchange.groups):
        return EnvelopeProblem("024", "the interchange holds segments outside its GS…GE functional groups")
    return None


def _isa_values(fields: Sequence[str]) -> EnvelopeProblem | None:
    for position, codes in _ISA_CODES.items():
        if fields[position - 1] not in codes:
            return EnvelopeProblem(
                _WIDTH_CODES[position - 1],
                f"ISA{position:02d} {fields[position - 1]!r} is not one of {', '.join(sorted(codes))}",
            )
    try:
        datetime.strptime(fields[8], "%y%m%d")
    except ValueError:
        return EnvelopeProblem("014", f"ISA09 {fields[8]!r} is not a date YYMMDD")
    try:
        datetime.strptime(fields[9], "%H%M")
    except ValueError:
        return EnvelopeProblem("015", f"ISA10 {fields[9]!r} is not a time HHMM")
    if not fields[12].isdigit():
        return EnvelopeProblem("018", f"ISA13 {fields[12]!r} is not a 9-digit control number")
    return None


def build_ta1(isa: X12Segment | None, problem: EnvelopeProblem, *, when: datetime) -> X12Segment:
    """TA1*control*date*time*R*note: the request's ISA13/09/10, or zeros when it had no readable ISA."""
    if isa is not None and len(isa.elements) >= 13 and isa.element(13).strip().isdigit():
        control = isa.element(13).strip().rjust(9, "0")[-9:]
    else:
        control = "000000000"
    date = isa.element(9).strip() if isa is not None else ""
    time = isa.element(10).strip() if isa is not None else ""
    if not (len(date) == 6 and date.isdigit()):
        date = when.strftime("%y%m%d")
    if not (len(time) == 4 and time.isdigit()):
        time = when.strftime("%H%M")
    return build_segment("TA1", control, date, time, "R", problem.code)


@dataclass(frozen=True, slots=True)
class ElementError:
    """IK4: element `position` (and `component`) of the segment, with its IK403 code."""

    position: int
    code: str
    component: int | None = None
    reference: str | None = None
    """IK402, the data element reference number (`98` entity identifier code, `1251` date, …)."""
    bad_value: str | None = None


@dataclass(frozen=True, slots=True)
class SegmentError:
    """IK3: segment `segment_id` at `position` (ST = 1) in `loop`, with its IK304 code."""

    segment_id: str
    position: int
    code: str
    loop: str | None = None
    elements: tuple[ElementError, ...] = ()
    message: str = ""
    """What a person should read (kept by the caller; not written into the 999)."""


@dataclass(frozen=True, slots=True)
class TransactionAck:
    """AK2 … IK5 for one transaction set: accepted when it has no errors and no IK5 codes."""

    code: str
    control_number: str
    guide: str | None = None
    errors: tuple[SegmentError, ...] = ()
    set_codes: tuple[str, ...] = ()
    """IK502…IK506 besides the `5` implied by segment errors (`1` not supported, `4` count, …)."""

    @property
    def accepted(self) -> bool:
        return not self.errors and not self.set_codes


@dataclass(frozen=True, slots=True)
class GroupAck:
    """AK1 … AK9 for one functional group."""

    functional_id: str
    control_number: str
    guide: str | None
    transactions: tuple[TransactionAck, ...]
    group_codes: tuple[str, ...] = field(default=())


def build_999(group: GroupAck, *, control_number: str = "0001") -> X12TransactionSet:
    """The 999 (X231A1) for one received functional group."""
    body: list[X12Segment] = [
        build_segment("AK1", _safe(group.functional_id), _safe(group.control_number), _safe(group.guide))
    ]
    for ack in group.transactions:
        body.append(build_segment("AK2", _safe(ack.code), _safe(ack.control_number), _safe(ack.guide)))
        for error in ack.errors:
            body.extend(_ik3(error))
        codes = list(ack.set_codes)
        if ack.errors and "5" not in codes:
            codes.append("5")
        body.append(build_segment("IK5", "A" if ack.accepted else "R", *codes[:5]))
    # A group refused for its own trailer answers none of its sets, however well formed.
    accepted = 0 if group.group_codes else sum(1 for ack in group.transactions if ack.accepted)
    total = len(group.transactions)
    status = "A" if accepted == total and not group.group_codes else ("P" if accepted else "R")
    body.append(build_segment("AK9", status, total, total, accepted, *group.group_codes[:5]))
    return build_transaction("999", body, control_number=control_number, guide="005010X231A1")


def _ik3(error: SegmentError) -> list[X12Segment]:
    segment_id = error.segment_id if _is_id(error.segment_id) else "ZZZ"
    found = [build_segment("IK3", segment_id, error.position, error.loop, error.code)]
    for element in error.elements:
        position: str | tuple[int, int] = (
            str(element.position) if element.component is None else (element.position, element.component)
        )
        bad = element.bad_value if element.bad_value and _SAFE.fullmatch(element.bad_value) else None
        found.append(build_segment("IK4", position, element.reference, element.code, (bad or "")[:99]))
    return found


def _safe(text: str | None) -> str:
    """A received value echoed in AK1/AK2, without characters any delimiters could collide with."""
    return "".join(char for char in text or "" if char.isascii() and char.isalnum())


def _is_id(text: str) -> bool:
    return 2 <= len(text) <= 3 and text.isascii() and text.isalnum() and text.isupper()
