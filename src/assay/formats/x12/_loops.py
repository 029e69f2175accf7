"""Loop resolution: a transaction set's segments → a tree of loop instances.

HL segments open HL loops (id from HL03 through the guide, parent from HL02); inside an HL loop
the guide's triggers open sub-loops (2100C at NM1, 2110C at EB, 2120C at NM1 after LS, …). A
segment that triggers nothing stays in the innermost open loop, so every segment lands in exactly
one loop instance. Segments before the first HL (BHT) and the SE trailer belong to the root.
One pass, constant work per segment.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assay.formats.x12._guides import guide_for

if TYPE_CHECKING:
    from assay.formats.x12._model import X12Segment, X12TransactionSet

__all__ = ["X12Loop", "resolve_loops"]


@dataclass(eq=False)
class X12Loop:
    """One loop instance. `positions` are indices into the transaction set's segments."""

    id: str
    """Guide loop id (`2110C`); `""` for the transaction root."""
    positions: list[int] = field(default_factory=list)
    children: list[X12Loop] = field(default_factory=list)
    closer: str | None = None

    def descendants(self) -> Iterator[X12Loop]:
        """Every loop below this one, depth first, in document order of their openings."""
        stack = list(reversed(self.children))
        while stack:
            loop = stack.pop()
            yield loop
            stack.extend(reversed(loop.children))

    def all_positions(self) -> list[int]:
        """Positions of this loop's segments and of all its descendants', in document order."""
        found = list(self.positions)
        for loop in self.descendants():
            found.extend(loop.positions)
        found.sort()
        return found

    def find(self, loop_id: str) -> list[X12Loop]:
        return [loop for loop in self.descendants() if loop.id == loop_id]

    def outline(self, segments: list[X12Segment], depth: int = 0) -> list[str]:
        """`2000C HL NM1…` lines, indented: a readable dump for tests and debugging."""
        line = "  " * depth + (self.id or "(root)") + " " + " ".join(segments[p].id for p in self.positions)
        lines = [line.rstrip()]
        for child in self.children:
            lines.extend(child.outline(segments, depth + 1))
        return lines


def resolve_loops(transaction: X12TransactionSet) -> X12Loop:
    """Resolve the loop tree of one transaction set from its guide (chosen by ST01 and ST03/GS08)."""
    segments = transaction.segments
    root = X12Loop("")
    guide = guide_for(transaction.code, transaction.guide)
    if guide is None:
        root.positions.extend(range(len(segments)))
        return root
    hl_loops: dict[str, X12Loop] = {}
    triggers = guide.triggers
    stack: list[X12Loop] = [root]
    for position, segment in enumerate(segments):
        seg_id = segment.id
        if seg_id == "HL":
            stack = [_open_hl(segment, position, guide.hl_levels, hl_loops, root)]
            continue
        if seg_id == "SE":
            root.positions.append(position)
            continue
        if seg_id == stack[-1].closer and len(stack) > 1:
            stack.pop()
            stack[-1].positions.append(position)
            continue
        owners = guide.owners.get(seg_id)
        if owners is not None and "" in owners:
            stack = [root]
        if owners is not None and (stack[-1] is root or _close_to_owner(stack, owners)):
            stack[-1].positions.append(position)
            continue
        if seg_id not in triggers:
            stack[-1].positions.append(position)
            continue
        qualifier = segment.element(1)
        for depth in range(len(stack) - 1, -1, -1):
            rule = guide.child_rule(stack[depth].id, seg_id, qualifier)
            if rule is not None:
                loop = X12Loop(rule.loop, [position], closer=rule.closer)
                stack[depth].children.append(loop)
                del stack[depth + 1 :]
                stack.append(loop)
                break
        else:
            stack[-1].positions.append(position)
    return root


def _close_to_owner(stack: list[X12Loop], owners: frozenset[str]) -> bool:
    """Close loops down to the innermost open loop that owns the segment; False if none is open."""
    for depth in range(len(stack) - 1, 0, -1):
        if stack[depth].id in owners:
            del stack[depth + 1 :]
            return True
    return False


def _open_hl(
    segment: X12Segment,
    position: int,
    levels: Mapping[str, str],
    hl_loops: dict[str, X12Loop],
    root: X12Loop,
) -> X12Loop:
    """Open an HL loop under the HL loop HL02 names (the root when HL02 is empty or unknown)."""
    level = segment.element(3).strip()
    loop_id = levels.get(level)
    loop = X12Loop(loop_id or f"HL{level}", [position])
    parent = hl_loops.get(segment.element(2).strip(), root)
    parent.children.append(loop)
    hl_loops[segment.element(1).strip()] = loop
    return loop
