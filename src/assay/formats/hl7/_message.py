"""`Hl7Message`: one parsed message and path access into it (docs/assertions.md).

python-hl7 builds the tree; this module reads it by our grammar. Its tree has an irregular depth —
a field with no delimiter in it is a bare string, a repetition without `^` holds strings rather
than components — so every step below goes through `_child`, which treats a string as a node with
exactly one child, itself. That is also HL7's own rule: component 1 of a primitive field is the
field.

Empty and null (HL7 v2.5.1 §2.5.3, docs/assertions.md): an empty position (`||`) was not sent and reads as
absent; the explicit null `""` reads as present with value None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.formats.hl7._escapes import Delimiters, unescape
from assay.formats.hl7._path import Hl7Path

__all__ = ["ABSENT", "Hl7Message", "Hl7Value"]

_HEADER_SEGMENTS = frozenset({"MSH", "BHS", "FHS"})
_NULL = '""'


@dataclass(frozen=True, slots=True)
class Hl7Value:
    """What reading one path found."""

    found: bool
    """The path resolved: the position holds a value or the explicit null `""`."""
    value: str | None
    """Decoded text; None when absent or `""`."""


ABSENT = Hl7Value(False, None)
_NULL_VALUE = Hl7Value(True, None)


class Hl7Message:
    """One HL7v2 message: its delimiters, its segments in order, and `read(path)`."""

    __slots__ = ("_index", "_tree", "delimiters", "position", "segment_ids", "text")

    def __init__(
        self,
        tree: Sequence[Any],
        segment_ids: Sequence[str],
        delimiters: Delimiters,
        text: str,
        position: int = 1,
    ):
        self._tree = tree
        self.segment_ids: tuple[str, ...] = tuple(segment_ids)
        """Segment IDs in message order (`MSH`, `PID`, `OBX`, …)."""
        self.delimiters = delimiters
        self.text = text
        """The message with CR segment ends, as python-hl7 parsed it."""
        self.position = position
        """1-based place of this message in its input (batches hold several)."""
        index: dict[str, list[Any]] = {}
        for segment_id, segment in zip(self.segment_ids, tree, strict=True):
            index.setdefault(segment_id, []).append(segment)
        self._index = index

    def __repr__(self) -> str:
        return f"<Hl7Message {self.message_type.value or '?'} control_id={self.control_id.value!r}>"

    def segments(self, segment_id: str) -> int:
        """How many segments with this ID the message holds (occurrences count message-wide)."""
        return len(self._index.get(segment_id, ()))

    def read(self, path: Hl7Path | str) -> Hl7Value:
        """The value at `path`: absent, null (`""`), or decoded text.

        A path that stops at a field or component yields it re-joined by `^` and `&` (docs/assertions.md),
        each part decoded, trailing empty parts dropped (`A^B^^` reads as `A^B`).
        """
        if isinstance(path, str):
            path = Hl7Path.parse(path)
        segments = self._index.get(path.segment)
        if segments is None or path.occurrence > len(segments):
            return ABSENT
        segment = segments[path.occurrence - 1]
        if path.field >= len(segment):
            return ABSENT
        node = segment[path.field]
        if path.field <= 2 and path.segment in _HEADER_SEGMENTS:
            return _header_field(node, path)
        node = _child(node, path.repetition)
        if node is None:
            return ABSENT
        if path.component is None:
            return self._value(_joined(node, "^", self.delimiters))
        node = _child(node, path.component)
        if node is None:
            return ABSENT
        if path.subcomponent is None:
            return self._value(_joined(node, "&", self.delimiters))
        node = _child(node, path.subcomponent)
        if node is None:
            return ABSENT
        return self._value(unescape(node, self.delimiters) if isinstance(node, str) else "")

    @staticmethod
    def _value(text: str) -> Hl7Value:
        if not text:
            return ABSENT
        if text == _NULL:
            return _NULL_VALUE
        return Hl7Value(True, text)

    @property
    def message_type(self) -> Hl7Value:
        """`MSH-9.1^MSH-9.2`, e.g. `ADT^A04`; just MSH-9.1 when there is no trigger event."""
        code, event = self.read(_MSH_9_1), self.read(_MSH_9_2)
        if not code.found and not event.found:
            return ABSENT
        text = code.value or ""
        if event.value:
            text += "^" + event.value
        return self._value(text)

    @property
    def trigger_event(self) -> Hl7Value:
        """MSH-9.2."""
        return self.read(_MSH_9_2)

    @property
    def control_id(self) -> Hl7Value:
        """MSH-10, the message control ID."""
        return self.read(_MSH_10)


_MSH_9_1 = Hl7Path("MSH", 9, component=1)
_MSH_9_2 = Hl7Path("MSH", 9, component=2)
_MSH_10 = Hl7Path("MSH", 10)


def _child(node: Any, position: int) -> Any:
    """The 1-based child of a python-hl7 node; a bare string is its own only child."""
    if isinstance(node, str):
        return node if position == 1 else None
    return node[position - 1] if position <= len(node) else None


def _joined(node: Any, separator: str, delimiters: Delimiters) -> str:
    """A repetition (`^` then `&`) or a component (`&`) as text, each leaf decoded."""
    if isinstance(node, str):
        return unescape(node, delimiters)
    inner = "&" if separator == "^" else ""
    parts = [_joined(child, inner, delimiters) if inner else unescape(child, delimiters) for child in node]
    while parts and not parts[-1]:
        parts.pop()
    return separator.join(parts)


def _header_field(node: Any, path: Hl7Path) -> Hl7Value:
    """MSH-1 and MSH-2 hold the delimiters themselves: verbatim, one repetition, one component."""
    if path.repetition != 1 or (path.component or 1) != 1 or (path.subcomponent or 1) != 1:
        return ABSENT
    text = node if isinstance(node, str) else "".join(str(part) for part in node)
    return Hl7Value(True, text) if text else ABSENT
