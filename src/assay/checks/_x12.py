"""Reading X12 records for the checks: parsed once per text, and the member a transaction is about.

`x12-response` correlates a reply by member, and `no-unexpected-changes` allows an exchange by the
member its request names; both read the same NM1*IL NM109 paths from here.
"""

from __future__ import annotations

from typing import NamedTuple

from assay.checks._parsed import parse_once
from assay.formats.x12 import X12Document, X12ParseError, X12Path, X12TransactionSet, parse_x12

__all__ = ["MEMBER_ID_PATHS", "ParsedX12", "every_value", "member_ids", "parsed_x12"]

MEMBER_ID_PATHS = {
    "270": "2100C/NM1[IL]09",
    "271": "2100C/NM1[IL]09",
    "276": "2100D/NM1[IL]09",
    "277": "2100D/NM1[IL]09",
    "278": "2010C/NM1[IL]09",
}
"""The subscriber's member id in each transaction set (NM1*IL NM109 of its subscriber loop)."""


class ParsedX12(NamedTuple):
    document: X12Document | None
    error: str | None


def _parse(raw: str) -> ParsedX12:
    try:
        return ParsedX12(parse_x12(raw), None)
    except X12ParseError as exc:
        return ParsedX12(None, str(exc))


parsed_x12 = parse_once(_parse, maxsize=256)
"""Parse once per stored text: several criteria of a task read the same records."""


def every_value(path_text: str | None, transaction: X12TransactionSet) -> list[str]:
    """The path's element from every selected segment (all subscribers of a batched 277)."""
    if path_text is None:
        return []
    path = X12Path.parse(path_text)
    return [
        value
        for segment in path.select(transaction)
        if (value := segment.value(path.element, path.repetition, path.component))
    ]


def member_ids(transaction: X12TransactionSet) -> list[str]:
    """Every member id the transaction names (one per subscriber of a batch)."""
    return every_value(MEMBER_ID_PATHS.get(transaction.code), transaction)
