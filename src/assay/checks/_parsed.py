"""Parsing a stored text once for all the criteria of a task that read it.

Several criteria of one task judge the same outbound messages or responses, so `hl7-structural`
and `x12-response` keep recent parses. Texts longer than `CACHED_UP_TO` are parsed every time,
which bounds the cache's memory (≤ maxsize × 64 KiB of text plus its parse).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

__all__ = ["CACHED_UP_TO", "parse_once"]

T = TypeVar("T")

CACHED_UP_TO = 64 * 1024


def parse_once(parse: Callable[[str], T], *, maxsize: int) -> Callable[[str], T]:
    """`parse`, remembered for the last `maxsize` texts of at most `CACHED_UP_TO` characters."""
    cached = lru_cache(maxsize=maxsize)(parse)

    def parsed(raw: str) -> T:
        return cached(raw) if len(raw) <= CACHED_UP_TO else parse(raw)

    return parsed
