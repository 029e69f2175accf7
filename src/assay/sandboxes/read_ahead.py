"""Datasets' contents in load order, the next ones read from the database while one is decoded.

A `start` that builds a big FHIR layer reads each dataset's stored text and decodes it, one after
the other; the read (a round trip, the server decompressing and sending ~0.5 MB) left the
decoding thread waiting 1.6 s of a 1,024-patient start on PostgreSQL. A dataset that
can be read on another thread says so with `read_ahead()` (the service's `StoredDataset`, whose
reads are units of work of their own); `contents` asks the next `AHEAD` of them to start while
it hands out the current one. Anything else is read when asked, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["AHEAD", "ReadsAhead", "contents"]

AHEAD = 2
"""Datasets read ahead of the one being decoded (each holds its text, ~0.5 MB for Synthea, until used)."""


@runtime_checkable
class ReadsAhead(Protocol):
    def read_ahead(self) -> None:
        """Start reading `data` on another thread, if not read yet; `["data"]` then waits for it."""


def contents(datasets: Sequence[Mapping[str, Any]]) -> Iterator[Any]:
    """Each dataset's `data`, in order; the next `AHEAD` that can be read ahead are started first."""
    for at, dataset in enumerate(datasets):
        for later in datasets[at + 1 : at + 1 + AHEAD]:
            if isinstance(later, ReadsAhead):
                later.read_ahead()
        yield dataset.get("data")
