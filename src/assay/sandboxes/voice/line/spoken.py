"""What a caller says or keys, read the way a payer line reads it: digits, dates, yes and no.

Pure functions. Spoken digits ("one two three", "oh") become digits, a run of digits separated by
spaces or dashes is one number, and a date is read from ISO, `MM/DD/YYYY`, eight keyed digits
(`MMDDYYYY`, as payer IVRs ask) or words ("January 5, 1980").
"""

from __future__ import annotations

import re
from datetime import date

__all__ = ["as_digits", "digit_runs", "npi_valid", "read_date", "says_no", "says_yes", "spell_digits"]

_DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_SLASHED = re.compile(r"\b(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})\b")
_WORDED = re.compile(r"\b([a-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_RUN = re.compile(r"\d(?:[\s-]?\d)*")
_YES = frozenset({"yes", "yeah", "yep", "correct", "right", "confirm", "confirmed", "affirmative"})
_NO = frozenset({"no", "nope", "wrong", "incorrect", "reenter", "re-enter"})


def as_digits(text: str) -> str:
    """The text with every spoken digit word replaced by its digit (other words kept)."""
    words = re.findall(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]+|\s+", text)
    return "".join(_DIGIT_WORDS.get(word.lower(), word) if word.isalpha() else word for word in words)


def digit_runs(text: str) -> list[str]:
    """Every number in the text, spoken or written, separators dropped (`1 2 3-4` → `1234`)."""
    converted = as_digits(text)
    converted = re.sub(r"(?<=\d) (?=\d)", "", re.sub(r"(?<=\d)\s+(?=\d)", " ", converted))
    return [re.sub(r"[\s-]", "", run) for run in _RUN.findall(converted)]


def npi_valid(npi: str) -> bool:
    """Ten digits whose last is the Luhn check digit of `80840` + the first nine (NPPES)."""
    if len(npi) != 10 or not npi.isdigit():
        return False
    total = 0
    for position, char in enumerate(reversed("80840" + npi[:9])):
        value = int(char) * (2 if position % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return (10 - total % 10) % 10 == int(npi[9])


def read_date(text: str, *, keyed: bool = False) -> tuple[date | None, str]:
    """The first date in the text and the text without it; (None, text) when there is none.
    `keyed`: eight digits are `MMDDYYYY` (a date entered on the keypad)."""
    if keyed:
        digits = re.sub(r"\D", "", text)
        if len(digits) == 8:
            return _date(int(digits[4:]), int(digits[:2]), int(digits[2:4])), ""
        return None, text
    lowered = as_digits(text).lower()
    for pattern, order in ((_ISO, "ymd"), (_SLASHED, "mdy"), (_WORDED, "Mdy")):
        found = pattern.search(lowered)
        if found is None:
            continue
        parts = dict(zip(order, found.groups(), strict=True))
        month = int(parts["m"]) if "m" in parts else _MONTHS.get(parts["M"])
        if month is None:
            continue
        when = _date(int(parts["y"]), month, int(parts["d"]))
        if when is not None:
            return when, lowered[: found.start()] + " " + lowered[found.end() :]
    return None, text


def _date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z-]+", text.lower()))


def says_yes(text: str) -> bool:
    words = _words(text)
    return bool(words & _YES) and not words & _NO


def says_no(text: str) -> bool:
    return bool(_words(text) & _NO) or "not right" in text.lower()


def spell_digits(value: str) -> str:
    """Read back the way a line does: one character at a time (`W123` → `W 1 2 3`)."""
    return " ".join(value)
