"""Errors of the X12 package.

Tree::

    ValueError
    ├── X12ParseError      the input is not X12 (no ISA, unreadable delimiters, bad segment id)
    └── X12PathError       a path string does not follow the X12 path grammar (a 422 upstream)

Envelope problems (counts and control numbers that disagree, a missing IEA) are not errors: they
are warnings on the model (docs/assertions.md).
"""

from __future__ import annotations

__all__ = ["X12ParseError", "X12PathError"]


class X12ParseError(ValueError):
    """Input that is not X12, with where it happened.

    `segment` is the 0-based index of the segment in the input, `element` the 1-based element
    position when known (0 = the segment id), `offset` the byte offset in the UTF-8 input.
    """

    def __init__(
        self,
        message: str,
        *,
        segment: int | None = None,
        element: int | None = None,
        offset: int | None = None,
    ):
        self.reason = message
        self.segment = segment
        self.element = element
        self.offset = offset
        where = ", ".join(
            f"{name} {value}"
            for name, value in (("segment", segment), ("element", element), ("byte offset", offset))
            if value is not None
        )
        super().__init__(f"{message} (at {where})" if where else message)


class X12PathError(ValueError):
    """A string that is not an X12 path; the message names the path and what was expected."""
