"""Writing X12: the model back to text with chosen delimiters and correct control counts.

The clearinghouse (docs/sandboxes.md) builds its 271/277/278 responses with `build_segment`,
`build_transaction` and `build_interchange`, then serializes with `write_x12`. Whatever the
model says, the writer emits SE01 (segments ST…SE), SE02 = ST02, GE01 (transaction sets),
GE02 = GS06, IEA01 (functional groups) and IEA02 = ISA13 computed from what it writes, and
supplies a missing trailer. Trailing empty elements and components are suppressed, as X12.5
requires; ISA fields are padded to their fixed widths.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from decimal import Decimal

from assay.formats.x12._model import (
    DEFAULT_DELIMITERS,
    Delimiters,
    X12Document,
    X12FunctionalGroup,
    X12Interchange,
    X12Segment,
    X12TransactionSet,
)

__all__ = ["FUNCTIONAL_IDS", "build_interchange", "build_segment", "build_transaction", "write_x12"]

FUNCTIONAL_IDS = {
    "270": "HS", "271": "HB", "276": "HR", "277": "HN", "278": "HI",
    "820": "RA", "834": "BE", "835": "HP", "837": "HC", "997": "FA", "999": "FA",
}  # fmt: skip
"""GS01 functional identifier code per transaction set (X12 functional group ids)."""

_ISA_WIDTHS = (2, 10, 2, 10, 2, 15, 2, 15, 6, 4, 1, 5, 9, 1, 1, 1)
_ISA_NUMERIC = frozenset({13})

Scalar = str | int | Decimal | None
ElementValue = Scalar | tuple[Scalar, ...] | list[Scalar | tuple[Scalar, ...]]
"""A plain value; a tuple is a composite (components); a list is repetitions."""


def build_segment(
    segment_id: str, *elements: ElementValue, delimiters: Delimiters = DEFAULT_DELIMITERS
) -> X12Segment:
    """One segment from Python values: `build_segment("EB", "1", "", ["30", "1"], ...)`.

    Raises:
        ValueError: a value contains one of the delimiters, or a list of repetitions is given
            while the delimiters declare no repetition separator.
    """
    return X12Segment(segment_id, tuple(_element(value, delimiters) for value in elements), delimiters)


def build_transaction(
    code: str,
    body: Iterable[X12Segment | Sequence[ElementValue]],
    *,
    control_number: str = "0001",
    guide: str | None = None,
    delimiters: Delimiters = DEFAULT_DELIMITERS,
) -> X12TransactionSet:
    """Wrap body segments (segments, or `("SEG", e1, e2, …)` tuples) in ST/SE with a correct SE01."""
    segments = [build_segment("ST", code, control_number, *([guide] if guide else []), delimiters=delimiters)]
    for item in body:
        if isinstance(item, X12Segment):
            segments.append(item)
        else:
            seg_id, *values = item
            segments.append(build_segment(str(seg_id), *values, delimiters=delimiters))
    segments.append(build_segment("SE", len(segments) + 1, control_number, delimiters=delimiters))
    return X12TransactionSet(segments)


def build_interchange(
    transactions: Iterable[X12TransactionSet],
    *,
    sender_id: str,
    receiver_id: str,
    sender_qualifier: str = "ZZ",
    receiver_qualifier: str = "ZZ",
    control_number: int = 1,
    group_control_number: int = 1,
    usage: str = "P",
    when: datetime | None = None,
    delimiters: Delimiters = DEFAULT_DELIMITERS,
    application_sender: str | None = None,
    application_receiver: str | None = None,
) -> X12Interchange:
    """ISA/IEA around GS/GE groups (one per functional id, in order of first appearance).

    GS02/GS03 are `application_sender`/`application_receiver` when given (a reply swaps the
    request's GS02/GS03, which need not equal its ISA06/ISA08), else the interchange ids.
    """
    stamp = when or datetime.now(UTC)
    gs_sender = application_sender or sender_id
    gs_receiver = application_receiver or receiver_id
    header = [
        "00", "", "00", "", sender_qualifier, sender_id, receiver_qualifier, receiver_id,
        stamp.strftime("%y%m%d"), stamp.strftime("%H%M"), "", "00501", f"{control_number:09d}", "0", usage,
    ]  # fmt: skip
    isa = build_segment("ISA", *header, delimiters=delimiters)
    # ISA11 and ISA16 carry delimiters themselves; they are set, not validated as values.
    isa = X12Segment(
        "ISA",
        (*isa.elements[:10], delimiters.repetition or "U", *isa.elements[11:], delimiters.component),
        delimiters,
    )
    interchange = X12Interchange(isa)
    by_id: dict[str, X12FunctionalGroup] = {}
    for transaction in transactions:
        functional_id = FUNCTIONAL_IDS.get(transaction.code, "ZZ")
        group = by_id.get(functional_id)
        if group is None:
            number = str(group_control_number + len(by_id))
            gs = build_segment(
                "GS", functional_id, gs_sender, gs_receiver, stamp.strftime("%Y%m%d"),
                stamp.strftime("%H%M"), number, "X", transaction.guide or "005010", delimiters=delimiters,
            )  # fmt: skip
            group = by_id[functional_id] = X12FunctionalGroup(gs, interchange=interchange)
            interchange.groups.append(group)
        transaction.group = group
        group.transactions.append(transaction)
    for group in interchange.groups:
        group.ge = build_segment(
            "GE", len(group.transactions), group.gs.element(6) if group.gs else "1", delimiters=delimiters
        )
    interchange.iea = build_segment(
        "IEA", len(interchange.groups), f"{control_number:09d}", delimiters=delimiters
    )
    return interchange


def write_x12(
    source: X12Document | X12Interchange | X12TransactionSet | Iterable[X12Segment],
    delimiters: Delimiters | None = None,
    *,
    line_break: str = "",
) -> str:
    """Serialize with `delimiters` (default: the source interchange's), recomputing control counts.

    `line_break` (e.g. "\\n") is written after each segment terminator for readability.

    Raises:
        ValueError: the delimiters are invalid, or a value contains one of them.
    """
    if isinstance(source, X12Document):
        return "".join(write_x12(ic, delimiters, line_break=line_break) for ic in source.interchanges)
    if isinstance(source, X12Interchange):
        target = delimiters or source.delimiters
        target.validate()
        return _join(_interchange_lines(source, target), target, line_break)
    if isinstance(source, X12TransactionSet):
        target = delimiters or source.st.delimiters
        target.validate()
        return _join(_transaction_lines(source, target), target, line_break)
    segments = list(source)
    target = delimiters or (segments[0].delimiters if segments else DEFAULT_DELIMITERS)
    target.validate()
    lines = [_render_isa(s, target) if s.id == "ISA" else _render(s, target) for s in segments]
    return _join(lines, target, line_break)


def _join(lines: list[str], delimiters: Delimiters, line_break: str) -> str:
    end = delimiters.segment + line_break
    return end.join(lines) + end if lines else ""


def _interchange_lines(interchange: X12Interchange, target: Delimiters) -> list[str]:
    lines = [_render_isa(interchange.isa, target)]
    lines.extend(_render(s, target) for s in interchange.other)
    for number, group in enumerate(interchange.groups, 1):
        gs = group.gs or _implied_gs(interchange.isa, group, number)
        control = gs.element(6)
        lines.append(_render(gs, target))
        for transaction in group.transactions:
            lines.extend(_transaction_lines(transaction, target))
        lines.append(_render(X12Segment("GE", (str(len(group.transactions)), control)), target))
    iea = X12Segment("IEA", (str(len(interchange.groups)), interchange.isa.element(13)))
    lines.append(_render(iea, target))
    return lines


def _implied_gs(isa: X12Segment, group: X12FunctionalGroup, number: int) -> X12Segment:
    """A GS for transaction sets read outside any functional group, so the output is well formed."""
    first = group.transactions[0] if group.transactions else None
    code = first.code if first is not None else ""
    guide = first.guide if first is not None else ""
    date = isa.element(9).strip()
    return X12Segment(
        "GS",
        (FUNCTIONAL_IDS.get(code, "ZZ"), isa.element(6).strip(), isa.element(8).strip(),
         ("20" + date) if len(date) == 6 else date, isa.element(10).strip(), str(number), "X", guide or "005010"),
    )  # fmt: skip


def _transaction_lines(transaction: X12TransactionSet, target: Delimiters) -> list[str]:
    body = transaction.segments[1:-1] if transaction.se is not None else transaction.segments[1:]
    lines = [_render(transaction.st, target)]
    lines.extend(_render(s, target) for s in body)
    se = X12Segment("SE", (str(len(body) + 2), transaction.st.element(2)))
    lines.append(_render(se, target))
    return lines


def _render_isa(isa: X12Segment, target: Delimiters) -> str:
    fields = [isa.element(i + 1).strip() for i in range(16)]
    fields[10] = target.repetition or (fields[10] if fields[10].isalnum() else "U")
    fields[15] = target.component
    for index, value in enumerate(fields):
        width = _ISA_WIDTHS[index]
        if index + 1 in _ISA_NUMERIC:
            fields[index] = value.rjust(width, "0")
        else:
            fields[index] = value.ljust(width)
        _refuse_delimiters(fields[index] if index not in (10, 15) else "", target)
    return target.element.join(("ISA", *fields))


def _render(segment: X12Segment, target: Delimiters) -> str:
    source = segment.delimiters
    same = source == target
    elements: list[str] = []
    for position in range(1, len(segment.elements) + 1):
        if same:
            text = segment.elements[position - 1]
        else:
            reps = []
            for rep in segment.repetitions(position):
                components = _trim(rep.split(source.component))
                for component in components:
                    _refuse_delimiters(component, target)
                reps.append(target.component.join(components))
            if len(reps) > 1 and target.repetition is None:
                raise ValueError(
                    f"{segment.id}{position:02d} repeats but the target delimiters have no repetition separator"
                )
            text = (target.repetition or "").join(reps)
        elements.append(text)
    return target.element.join((segment.id, *_trim(elements)))


def _trim(values: list[str]) -> list[str]:
    end = len(values)
    while end and not values[end - 1]:
        end -= 1
    return values[:end]


def _element(value: ElementValue, delimiters: Delimiters) -> str:
    if isinstance(value, list):
        if len(value) > 1 and delimiters.repetition is None:
            raise ValueError("repetitions need a repetition separator in the delimiters")
        return (delimiters.repetition or "").join(_element(item, delimiters) for item in value)
    if isinstance(value, tuple):
        parts = [_scalar(part, delimiters) for part in value]
        return delimiters.component.join(_trim(parts))
    return _scalar(value, delimiters)


def _scalar(value: Scalar, delimiters: Delimiters) -> str:
    text = "" if value is None else str(value)
    _refuse_delimiters(text, delimiters)
    return text


def _refuse_delimiters(text: str, delimiters: Delimiters) -> None:
    for char in (delimiters.element, delimiters.component, delimiters.repetition, delimiters.segment):
        if char and char in text:
            raise ValueError(f"X12 value {text!r} contains the delimiter {char!r}")
