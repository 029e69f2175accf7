"""The two errors of the HL7v2 layer.

```
ValueError
 ├── Hl7ParseError   raw input is not an HL7v2 message, batch or file (with its position)
 └── Hl7PathError    a path string does not follow the grammar of docs/assertions.md
```

Both subclass `ValueError` so callers that only care about "bad input" can catch one type. No
python-hl7 exception ever leaves this package: `_reader.parse_messages` translates at the one place
where raw text enters.
"""

from __future__ import annotations

__all__ = ["Hl7ParseError", "Hl7PathError"]


class Hl7ParseError(ValueError):
    """Raw input that is not HL7v2; `segment` is the 1-based segment line it was found at."""

    def __init__(self, reason: str, *, segment: int | None = None, segment_id: str | None = None):
        self.reason = reason
        self.segment = segment
        self.segment_id = segment_id
        where = ""
        if segment is not None:
            where = f" (segment {segment}" + (f", {segment_id}" if segment_id else "") + ")"
        super().__init__(f"{reason}{where}")


class Hl7PathError(ValueError):
    """A path that is not `SEG[occ].FIELD[rep].COMPONENT.SUBCOMPONENT` (docs/assertions.md)."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(
            f"invalid HL7 path {path!r}: {reason}; "
            "expected SEG[occurrence].FIELD[repetition].COMPONENT.SUBCOMPONENT, e.g. PID.5.1 or PID.3[2].1"
        )
