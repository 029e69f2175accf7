"""How payer values are written into replies: amounts, dates and coverage periods."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from assay.sandboxes.payer import CoveragePeriod
from assay.sandboxes.x12._hl import Row

__all__ = ["amount", "d8", "period_rows"]


def amount(value: Decimal) -> str:
    """X12 R type: no exponent, no trailing zeros (`600.00` → `600`, `0.20` → `0.2`)."""
    text = format(value.normalize(), "f")
    return text


def d8(day: date) -> str:
    return day.strftime("%Y%m%d")


def period_rows(period: CoveragePeriod, *, both: str, start: str, end: str) -> list[Row]:
    """DTP rows for a coverage period: one RD8 range when both ends are known, else one D8."""
    if period.start is not None and period.end is not None:
        return [("DTP", both, "RD8", f"{d8(period.start)}-{d8(period.end)}")]
    if period.start is not None:
        return [("DTP", start, "D8", d8(period.start))]
    if period.end is not None:
        return [("DTP", end, "D8", d8(period.end))]
    return []
