"""Reading replies back through our own parser and loop resolver, loop by loop (SPEC §5.3)."""

from __future__ import annotations

from assay.formats.x12 import X12Document, X12Path, X12TransactionSet, parse_x12

FIRST_SEGMENT = {"2000": "HL", "2010": "NM1", "2100": "NM1", "2110": "EB", "2115": "III", "2120": "NM1",
                 "2200": "TRN", "2210": "SVC", "2220": "SVC"}  # fmt: skip
"""The segment that must open each loop (by the loop id's digits)."""
OWNERS = {"EB": ("211",), "AAA": ("2100", "2010"), "HCR": ("2000E", "2000F"), "STC": ("2200",), "MSG": ("2",)}
"""Where reply segments may sit: EB only in 2110x, HCR in 2000E/2000F, STC in a 2200x claim loop."""


def read_back(text: str) -> X12Document:
    """Parse strictly with no envelope warning, and check each loop opens with its trigger."""
    document = parse_x12(text)
    assert document.all_warnings() == [], document.all_warnings()
    for transaction in document.transactions():
        loops_hold_together(transaction)
    return document


def loops_hold_together(transaction: X12TransactionSet) -> None:
    segments = transaction.segments
    for loop in transaction.loops.descendants():
        first = segments[loop.positions[0]].id
        expected = FIRST_SEGMENT.get(loop.id[:4])
        assert expected is None or first == expected, (loop.id, first, transaction.loops.outline(segments))
        for position in loop.positions:
            owner = OWNERS.get(segments[position].id)
            assert owner is None or loop.id.startswith(owner), (segments[position], loop.id)
    assert not any(segments[p].id in OWNERS and segments[p].id != "MSG" for p in transaction.loops.positions)


def transactions(text: str) -> list[X12TransactionSet]:
    return list(read_back(text).transactions())


def read(transaction: X12TransactionSet, path: str) -> str | None:
    return X12Path.parse(path).read(transaction)


def every(transaction: X12TransactionSet, path: str) -> list[str | None]:
    parsed = X12Path.parse(path)
    return [s.value(parsed.element, parsed.repetition, parsed.component) for s in parsed.select(transaction)]
