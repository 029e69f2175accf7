"""Per-search constant cost of the FHIR engine, robust to a loaded machine.

Run: `uv run python bench/bench_fhir_search_overhead.py`, here and in a checkout of the code before
the FHIR fidelity work (`git worktree add /tmp/old a999672`) to compare. For 200 searches of `bench_fhir.py`'s
mix, each timed as the minimum of 15 x 20 calls (a minimum drops the time the process was
preempted, so other load barely moves it), prints the median of those minima for
`FhirStore.search` and for `parse_search` alone.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

from assay.formats.fhir.query import parse_search
from assay.snapshot import open_snapshot, write_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_fhir


def _fastest(call: Any) -> float:
    return min(timeit.repeat(call, number=20, repeat=15)) / 20


def main() -> None:
    resources = bench_fhir.load_resources()
    with tempfile.TemporaryDirectory() as tmp:
        state = open_snapshot(write_snapshot(Path(tmp) / "s", fhir=resources))
        store = state.fhir
        mix = bench_fhir.search_mix(store.resources("Patient"), random.Random(2), 1000)
        for kind, params in mix:  # build the lazy indexes
            store.search(kind, params)
        searches, parses = [], []
        for kind, params in mix[:200]:
            searches.append(_fastest(lambda k=kind, p=params: store.search(k, p)))
            parses.append(_fastest(lambda k=kind, p=params: parse_search(k, p)))
    print(f"search: median of per-search minima {statistics.median(searches) * 1e6:.2f} us")
    print(f"parse_search alone: {statistics.median(parses) * 1e6:.2f} us")


if __name__ == "__main__":
    main()
