"""HL hierarchies: reading a request's (from the loops `formats.x12` resolves) and writing a reply's.

An HL loop (`2000A`…`2000F`) owns its own segments and those of its non-HL sub-loops (`2100C`,
`2110C`, `2210D`, …); `HlNode` gives that view, with the HL children in document order, so a
responder walks information source → receiver → subscriber → dependent as the guide nests them.
A responder answers with `Reply` nodes; `write_hl` numbers them (HL01 from 1, HL02 the parent,
HL04 whether children follow), so a rejected subscriber whose dependents are dropped never
leaves a dangling HL04 `1`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from assay.formats.x12 import X12Loop, X12Segment, X12TransactionSet
from assay.sandboxes.payer import Member, MemberMatch, PayerDefinition, find_member, match_dependent

__all__ = [
    "HlNode",
    "Reply",
    "Row",
    "answering_bht",
    "dependent_named",
    "echo",
    "echo_segment",
    "echoed",
    "hl_answer",
    "hl_tree",
    "member_named",
    "payer_name",
    "rejection_rows",
    "trn_echo",
    "write_hl",
]

Row = tuple[Any, ...]
"""A segment to write: `("NM1", "IL", "1", …)`, values as `formats.x12.build_segment` takes them."""

_REPLY_DELIMITERS = str.maketrans({"*": " ", ":": " ", "^": " ", "~": " "})


def echo(value: str | None) -> str:
    """A request value made safe to write back with the reply's delimiters (`* : ^ ~`)."""
    return (value or "").translate(_REPLY_DELIMITERS).strip()


def answering_bht(
    transaction: X12TransactionSet, structure: str, purpose: str, now: datetime, *tail: str
) -> Row:
    """The reply's BHT: its structure and purpose codes, the request's BHT03 echoed, date and time."""
    bht = next((s for s in transaction.segments if s.id == "BHT"), None)
    reference = echo(bht.element(3)) if bht is not None else ""
    return ("BHT", structure, purpose, reference, now.strftime("%Y%m%d"), now.strftime("%H%M"), *tail)


@dataclass(eq=False)
class Reply:
    """One HL loop of a reply: level code (HL03), its segments after the HL, its HL children."""

    level: str
    rows: list[Row] = field(default_factory=list)
    children: list[Reply] = field(default_factory=list)


def write_hl(nodes: list[Reply]) -> list[Row]:
    """HL-numbered rows of a reply tree, depth first in document order."""
    rows: list[Row] = []
    counter = 0

    def walk(node: Reply, parent: str) -> None:
        nonlocal counter
        counter += 1
        own = str(counter)
        rows.append(("HL", own, parent, node.level, "1" if node.children else "0"))
        rows.extend(node.rows)
        for child in node.children:
            walk(child, own)

    for node in nodes:
        walk(node, "")
    return rows


@dataclass(eq=False)
class HlNode:
    """One HL loop instance: its level code (HL03), segments (own and sub-loops'), HL children."""

    loop: str
    level: str
    segments: list[X12Segment]
    children: list[HlNode] = field(default_factory=list)

    def first(self, segment_id: str, qualifier: str | None = None) -> X12Segment | None:
        return next(self.all(segment_id, qualifier), None)

    def all(self, segment_id: str, qualifier: str | None = None) -> Iterator[X12Segment]:
        for segment in self.segments:
            if segment.id == segment_id and (qualifier is None or segment.element(1).strip() == qualifier):
                yield segment

    def value(self, segment_id: str, position: int, qualifier: str | None = None) -> str | None:
        segment = self.first(segment_id, qualifier)
        text = segment.element(position).strip() if segment is not None else ""
        return text or None


def hl_tree(transaction: X12TransactionSet) -> list[HlNode]:
    """The top-level HL nodes (normally one 2000A) of a resolved transaction set."""
    segments = transaction.segments
    return [_node(loop, segments) for loop in transaction.loops.children if _is_hl(loop)]


def _is_hl(loop: X12Loop) -> bool:
    return loop.id.startswith("2000") or loop.id.startswith("HL")


def _node(loop: X12Loop, segments: list[X12Segment]) -> HlNode:
    positions = list(loop.positions)
    children: list[HlNode] = []
    stack = list(reversed(loop.children))
    while stack:
        child = stack.pop()
        if _is_hl(child):
            children.append(_node(child, segments))
        else:
            positions.extend(child.positions)
            stack.extend(reversed(child.children))
    positions.sort()
    level = segments[loop.positions[0]].element(3).strip() if loop.positions else ""
    return HlNode(loop.id, level, [segments[p] for p in positions], children)


def trn_echo(node: HlNode) -> list[Row]:
    """The node's TRN segments as the payer echoes them: TRN01 `2` (referenced trace), same ids."""
    return [
        ("TRN", "2", *(echo(trn.element(i)) for i in (2, 3, 4)))
        for trn in node.all("TRN")
        if trn.element(2).strip()
    ]


def echo_segment(segment: X12Segment | None) -> Row | None:
    """A request segment copied into the reply: composites kept, only the first repetition."""
    if segment is None:
        return None
    values: list[object] = []
    for position in range(1, len(segment.elements) + 1):
        parts = segment.components(position)
        values.append(
            tuple(echo(part) for part in parts) if len(parts) > 1 else echo(parts[0] if parts else "")
        )
    return (segment.id, *values)


def rejection_rows(nm1: X12Segment | None, found: MemberMatch) -> list[Row]:
    """The request's name echoed, then AAA: `Y` (valid request, member not found) for 75, else `N`
    (X279A1 / X217 AAA01), the reject reason, follow-up `C` (please correct and resubmit)."""
    echoed = echo_segment(nm1)
    valid = "Y" if found.reject == "75" else "N"
    return [row for row in (echoed, ("AAA", valid, "", found.reject, "C")) if row is not None]


def echoed(segment: X12Segment | None) -> list[Row]:
    """The request's segment sent back (no rows when the request left it out)."""
    row = echo_segment(segment)
    return [] if row is None else [row]


def payer_name(payer: PayerDefinition, entity: str) -> Row:
    """The 2100A NM1 naming the information source from the payer definition: `PR` (payer) in
    the 271 and 277, `X3` (utilization management organization) in the 278."""
    info = payer.payer
    return ("NM1", entity, "2", info.name or info.id, "", "", "", "", info.id_qualifier, info.id)


def member_named(payer: PayerDefinition, nm1: X12Segment | None, birth_date: str | None) -> MemberMatch:
    """The member a subscriber loop's NM1 (id NM109, last NM103, first NM104) and birth date name."""
    if nm1 is None:
        return find_member(payer, None, first_name=None, last_name=None, birth_date=birth_date)
    return find_member(
        payer, nm1.element(9), first_name=nm1.element(4), last_name=nm1.element(3), birth_date=birth_date
    )


def dependent_named(
    payer: PayerDefinition, subscriber: Member, nm1: X12Segment | None, birth_date: str | None
) -> MemberMatch:
    """The dependent of `subscriber` a dependent loop's NM1 (id NM109, last NM103, first NM104) and
    birth date name."""
    return match_dependent(
        payer,
        subscriber,
        member_id=nm1.element(9) if nm1 is not None else None,
        first_name=nm1.element(4) if nm1 is not None else None,
        last_name=nm1.element(3) if nm1 is not None else None,
        birth_date=birth_date,
    )


def hl_answer(
    transaction: X12TransactionSet, payer: PayerDefinition, entity: str, subscriber: Callable[[HlNode], Reply]
) -> list[Row]:
    """The HL loops answering a request: the levels every answer opens with, the information
    source (2000A, the payer named as `entity`) and under it each receiver (2000B, its NM1 echoed),
    then each subscriber as `subscriber` answers it."""

    def receiver(node: HlNode) -> Reply:
        return Reply(node.level, echoed(node.first("NM1")), [subscriber(child) for child in node.children])

    sources = [
        Reply(node.level, [payer_name(payer, entity)], [receiver(child) for child in node.children])
        for node in hl_tree(transaction)
    ]
    return write_hl(sources)
