"""What the clearinghouse accepts: the syntax of the three request guides, as 999 errors.

Not a whole implementation guide: the checks a receiver needs before it can answer —
ST01 is the transaction the endpoint takes, ST/SE agree, BHT opens the set, HL ids and levels
hold together (X279A1, X212, X217 `2000x` loops), each segment is one the guide uses, with no
more elements than it defines, its mandatory elements present, its codes, dates (CCYYMMDD),
times and numbers well formed; and the loops a responder reads are there (a subscriber NM1, the
276 claim TRN, the 278 UM). Every error is an IK3 (segment id, position from ST = 1, loop) with
IK4s (element, IK403 code, the bad value) — see `formats.x12._acks` for the code lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from assay.formats.x12 import (
    ElementError,
    SegmentError,
    TransactionAck,
    X12Segment,
    X12TransactionSet,
    guide_for,
)

__all__ = ["GUIDE_IDS", "check_transaction"]

GUIDE_IDS = {"270": "005010X279A1", "276": "005010X212", "278": "005010X217"}
"""The implementation guide each endpoint answers (ST03/GS08 of the replies)."""


@dataclass(frozen=True, slots=True)
class _El:
    """One element: mandatory, its code list, its type (AN, ID, DT, TM, N, R) and maximum length."""

    required: bool = False
    codes: frozenset[str] | None = None
    kind: str = "AN"
    max: int | None = None
    reference: str | None = None


def _codes(*values: str) -> frozenset[str]:
    return frozenset(values)


_ANY = _El()
_ID_QUALIFIERS = _codes(
    "24", "34", "46", "FI", "II", "MI", "PI", "SV", "XV", "XX", "ZZ", "PP", "SY", "EI", "ND"
)
_SEGMENTS: Mapping[str, tuple[_El, ...]] = {
    "BHT": (_El(True, kind="ID", reference="1005"), _El(True, kind="ID", reference="353"),
            _El(max=50, reference="127"), _El(True, kind="DT", reference="373"), _El(kind="TM", reference="337"),
            _El(kind="ID", reference="640")),
    "HL": (_El(True, kind="N", max=12, reference="628"), _El(kind="N", max=12, reference="734"),
           _El(True, kind="ID", reference="735"), _El(codes=_codes("0", "1"), reference="736")),
    "NM1": (_El(True, kind="ID", max=3, reference="98"), _El(True, _codes("1", "2"), reference="1065"),
            _El(max=60), _El(max=35), _El(max=25), _El(max=10), _El(max=10),
            _El(codes=_ID_QUALIFIERS, reference="66"), _El(max=80, reference="67"), _ANY, _ANY, _El(max=60)),
    "TRN": (_El(True, _codes("1", "2"), reference="481"), _El(True, max=50, reference="127"),
            _El(max=10, reference="509"), _El(max=50, reference="127")),
    "DMG": (_El(codes=_codes("D8"), reference="1250"), _El(max=35, reference="1251"),
            _El(codes=_codes("F", "M", "U"), reference="1068"), *(_ANY,) * 8),
    "DTP": (_El(True, kind="ID", max=3, reference="374"), _El(True, _codes("D8", "RD8"), reference="1250"),
            _El(True, max=35, reference="1251")),
    "EQ": (_El(max=2, reference="1365"), _ANY, _El(max=3), _ANY, _ANY),
    "REF": (_El(True, kind="ID", max=3, reference="128"), _El(max=50, reference="127"), _El(max=80), _ANY),
    "AMT": (_El(True, kind="ID", max=3, reference="522"), _El(True, kind="R", max=18, reference="782"), _ANY),
    "UM": (_El(True, _codes("AR", "HS", "SC", "IN"), reference="1525"), _El(kind="ID", reference="1322"),
           *(_ANY,) * 8),
    "SV1": (_El(True, reference="C003"), *(_ANY,) * 20),
    "SV2": (_ANY, _ANY, *(_ANY,) * 8),
    "SV3": (_El(True, reference="C003"), *(_ANY,) * 10),
    "SVC": (_El(True, reference="C003"), *(_ANY,) * 6),
}  # fmt: skip
_LOOSE: Mapping[str, int] = {
    "PRV": 3, "N3": 2, "N4": 7, "PER": 9, "INS": 17, "III": 4, "HI": 12, "HSD": 8, "PWK": 8,
    "CL1": 4, "MSG": 3, "CRC": 7, "TOO": 3, "CR1": 10, "CR2": 12, "CR5": 18, "CR6": 21, "CR7": 3,
    "CR8": 9, "HCR": 4, "VEH": 9, "PDR": 9, "PDP": 9, "AAA": 4,
}  # fmt: skip
"""Segments the guides use that we read no element of: only their element count is checked."""

_ALLOWED = {
    "270": frozenset({"BHT", "HL", "TRN", "NM1", "REF", "N3", "N4", "PRV", "DMG", "INS", "HI", "DTP",
                      "EQ", "AMT", "VEH", "PDR", "PDP", "III", "PER"}),
    "276": frozenset({"BHT", "HL", "NM1", "TRN", "REF", "AMT", "DTP", "DMG", "SVC", "PER"}),
    "278": frozenset({"BHT", "HL", "NM1", "REF", "N3", "N4", "PER", "PRV", "DMG", "INS", "TRN", "UM",
                      "HCR", "DTP", "HI", "HSD", "CRC", "CL1", "CR1", "CR2", "CR5", "CR6", "CR7", "CR8",
                      "PWK", "MSG", "SV1", "SV2", "SV3", "TOO", "AAA"}),
}  # fmt: skip
_BHT: Mapping[str, tuple[str, frozenset[str]]] = {
    "270": ("0022", _codes("01", "13")),
    "276": ("0010", _codes("13")),
    "278": ("0007", _codes("01", "13", "36")),
}
"""BHT01 hierarchical structure and BHT02 purpose codes of each request guide."""

_DATE = re.compile(r"[0-9]{8}")
_TIME = re.compile(r"[0-9]{4}([0-9]{2}([0-9]{1,2})?)?")
_NUMBER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)")


def check_transaction(transaction: X12TransactionSet, expected: str) -> TransactionAck:
    """The AK2/IK3/IK4/IK5 of one request transaction set posted to the `expected` endpoint."""
    code = transaction.code
    guide = transaction.guide or None
    if code != expected:
        bad = ElementError(1, "7", reference="143", bad_value=code)
        wrong = SegmentError(
            "ST", 1, "8", elements=(bad,), message=f"ST01 {code!r}: this endpoint takes {expected}"
        )
        return TransactionAck(code or "000", transaction.control_number or "0", guide, (wrong,), ("1",))
    errors = list(_segment_errors(transaction, expected))
    errors.extend(_structure_errors(transaction, expected))
    errors.sort(key=lambda error: error.position)
    loops = _loop_ids(transaction)
    errors = [
        error if error.loop else replace(error, loop=loops.get(error.position) or None) for error in errors
    ]
    return TransactionAck(code, transaction.control_number, guide, tuple(errors), _trailer_codes(transaction))


def _loop_ids(transaction: X12TransactionSet) -> dict[int, str]:
    """IK303: the loop each segment sits in, by position from ST = 1 (none for the header)."""
    found: dict[int, str] = {}
    for loop in transaction.loops.descendants():
        if loop.id[:4].isdigit():  # an HL with an unknown level is `HL99`: no loop to name
            for position in loop.positions:
                found[position + 1] = loop.id
    return found


def _trailer_codes(transaction: X12TransactionSet) -> tuple[str, ...]:
    se = transaction.se
    if se is None:
        return ("2",)
    codes = []
    if se.element(2).strip() != transaction.control_number:
        codes.append("3")
    if se.element(1).strip() != str(len(transaction.segments)):
        codes.append("4")
    return tuple(codes)


def _segment_errors(transaction: X12TransactionSet, expected: str) -> Iterator[SegmentError]:
    allowed = _ALLOWED[expected]
    body = transaction.segments[1:-1] if transaction.se is not None else transaction.segments[1:]
    if not body or body[0].id != "BHT":
        yield SegmentError("BHT", 2, "3", message="BHT must follow ST")
    for position, segment in enumerate(body, start=2):
        if not _is_id(segment.id):
            yield SegmentError(segment.id, position, "1", message=f"{segment.id[:20]!r} is not a segment id")
        elif segment.id not in allowed:
            yield SegmentError(segment.id, position, "2", message=f"{segment.id} is not used in a {expected}")
        else:
            elements = tuple(_element_errors(segment, expected))
            if elements:
                yield SegmentError(
                    segment.id, position, "8", elements=elements, message=_describe(segment, elements)
                )


def _describe(segment: X12Segment, elements: tuple[ElementError, ...]) -> str:
    first = elements[0]
    return f"{segment.id}{first.position:02d}: " + _IK403.get(first.code, "invalid")


_IK403 = {
    "1": "mandatory element missing", "2": "conditional element missing", "3": "too many elements",
    "5": "too long", "6": "invalid character", "7": "invalid code value", "8": "invalid date",
    "9": "invalid time",
}  # fmt: skip


def _element_errors(segment: X12Segment, expected: str) -> Iterator[ElementError]:
    specs = _SEGMENTS.get(segment.id)
    limit = len(specs) if specs is not None else _LOOSE.get(segment.id, 99)
    if len(segment.elements) > limit:
        yield ElementError(limit + 1, "3")
    if specs is None:
        return
    for position, spec in enumerate(specs, start=1):
        for value in segment.repetitions(position):
            error = _element_error(spec, value.strip(), position)
            if error is not None:
                yield error
                break
    yield from _semantic_errors(segment, expected)


def _element_error(spec: _El, value: str, position: int) -> ElementError | None:
    if not value:
        return ElementError(position, "1", reference=spec.reference) if spec.required else None
    code: str | None = None
    if spec.codes is not None and value not in spec.codes:
        code = "7"
    elif spec.max is not None and len(value) > spec.max:
        code = "5"
    elif spec.kind == "DT" and not _is_date(value):
        code = "8"
    elif spec.kind == "TM" and not _TIME.fullmatch(value):
        code = "9"
    elif (spec.kind == "N" and not _NUMBER.fullmatch(value)) or (
        spec.kind == "R" and not _DECIMAL.fullmatch(value)
    ):
        code = "6"
    return ElementError(position, code, reference=spec.reference, bad_value=value) if code else None


def _semantic_errors(segment: X12Segment, expected: str) -> Iterator[ElementError]:
    """Rules that tie elements together: BHT codes per guide, NM108/NM109 pairs, DTP formats."""
    if segment.id == "BHT":
        structure, purposes = _BHT[expected]
        if segment.element(1).strip() not in ("", structure):
            yield ElementError(1, "7", reference="1005", bad_value=segment.element(1).strip())
        if segment.element(2).strip() not in ("", *purposes):
            yield ElementError(2, "7", reference="353", bad_value=segment.element(2).strip())
    elif segment.id == "NM1":
        qualifier, identifier = segment.element(8).strip(), segment.element(9).strip()
        if qualifier and not identifier:
            yield ElementError(9, "2", reference="67")
        elif identifier and not qualifier:
            yield ElementError(8, "2", reference="66")
    elif segment.id == "DTP":
        kind, value = segment.element(2).strip(), segment.element(3).strip()
        if value and kind in ("D8", "RD8") and not _is_period(kind, value):
            yield ElementError(3, "8", reference="1251", bad_value=value)


def _structure_errors(transaction: X12TransactionSet, expected: str) -> Iterator[SegmentError]:
    """HL ids and parents hold together, levels are the guide's, and each loop has what we read."""
    guide = guide_for(expected)
    levels = guide.hl_levels if guide is not None else {}
    seen: set[str] = set()
    open_level: tuple[str, int, bool] | None = None
    has: set[str] = set()
    for position, segment in enumerate(transaction.segments, start=1):
        if segment.id == "HL":
            if open_level is not None:
                yield from _missing(expected, open_level, has, position)
            hl_id, parent, level = (segment.element(i).strip() for i in (1, 2, 3))
            if hl_id in seen:
                yield SegmentError("HL", position, "8", elements=(ElementError(1, "7", reference="628", bad_value=hl_id),),
                                   message=f"HL01 {hl_id} is used twice")  # fmt: skip
            elif parent and parent not in seen:
                yield SegmentError("HL", position, "8", elements=(ElementError(2, "7", reference="734", bad_value=parent),),
                                   message=f"HL02 {parent} names no earlier HL")  # fmt: skip
            elif level and level not in levels:
                yield SegmentError("HL", position, "8", elements=(ElementError(3, "7", reference="735", bad_value=level),),
                                   message=f"HL03 {level} is not a {expected} level")  # fmt: skip
            seen.add(hl_id)
            open_level, has = (levels.get(level, ""), position, segment.element(4).strip() == "1"), set()
        elif open_level is not None:
            has.add(segment.id)
    if open_level is not None:
        yield from _missing(expected, open_level, has, len(transaction.segments))
    if not seen:
        yield SegmentError("HL", 3, "3", message=f"a {expected} needs its HL hierarchy")


_NEEDS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "270": {"2000A": ("NM1",), "2000B": ("NM1",), "2000C": ("NM1",), "2000D": ("NM1",)},
    "276": {"2000A": ("NM1",), "2000B": ("NM1",), "2000C": ("NM1",), "2000D": ("NM1", "TRN"), "2000E": ("NM1", "TRN")},
    "278": {"2000A": ("NM1",), "2000B": ("NM1",), "2000C": ("NM1",), "2000D": ("NM1",), "2000E": ("UM",), "2000F": ("UM",)},
}  # fmt: skip
"""Segments each HL loop must hold for the responder to answer it (IK304 3, required segment missing)."""


def _missing(expected: str, opened: tuple[str, int, bool], has: set[str], end: int) -> Iterator[SegmentError]:
    """Required segments absent from the HL loop just closed; a 276 subscriber with a dependent
    below it (HL04 `1`) asks about the dependent's claim, so only the dependent needs a TRN."""
    loop, position, parent = opened
    for segment_id in _NEEDS[expected].get(loop, ()):
        if segment_id == "TRN" and parent:
            continue
        if segment_id not in has:
            sub = _sub_loop(expected, loop, segment_id)
            yield SegmentError(segment_id, min(position + 1, end), "3", loop=sub,
                               message=f"loop {sub} (HL at segment {position}) has no {segment_id}")  # fmt: skip


def _sub_loop(expected: str, loop: str, segment_id: str) -> str:
    """The loop the missing segment opens: 2100C/2010C for a name, 2200D for a 276 claim TRN."""
    if segment_id == "NM1":
        return ("2010" if expected == "278" else "2100") + loop[-1]
    if segment_id == "TRN" and expected == "276":
        return "2200" + loop[-1]
    return loop


def _is_id(text: str) -> bool:
    return 2 <= len(text) <= 3 and text.isascii() and text.isalnum() and text.isupper() and text[0].isalpha()


def _is_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        datetime.strptime(text, "%Y%m%d")
    except ValueError:
        return False
    return True


def _is_period(kind: str, value: str) -> bool:
    if kind == "D8":
        return _is_date(value)
    start, dash, end = value.partition("-")
    return bool(dash) and _is_date(start) and _is_date(end) and start <= end
