"""Soak of the clean cut: writes racing `complete`, round after round, on every surface.

    uv run python bench/soak_clean_cut.py [--minutes 3] [--writers 32] [--before 100]
        [--surface x12-270 ...] [--postgres [--workers 2]]

The history checker of `tests/sandboxes/test_clean_cut.py` (`tests/sandboxes/clean_cut.py`), run
longer: one real `assay serve` process (SQLite by default; `--postgres`: `ASSAY_BENCH_POSTGRES_URL`,
else a throwaway cluster as `bench_complete.py` makes, and `--workers` API workers), and for
`--minutes` it goes round the surfaces (FHIR create and transaction, HL7 over HTTP and MLLP, X12
270 and 276, the files API and SFTP, the portal's REST and web form, voice): each round starts a
task run, lets `--writers` writers tag every write, calls `complete` once `--before` writes were
acknowledged, lets every writer meet the end and reads the state tar.gz. A round passes when
what was acknowledged is exactly what was graded (`acknowledged ⊆ graded ⊆ acknowledged ∪
unknown`, nothing refused graded, no answer other than the surface's acknowledgement or refusal).

Prints a line per round and the totals per surface; exit 0 when every round passed. Bounded:
a round that does not finish its writers within 60 s fails, and no new round starts after
`--minutes`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _serve import assay_serve  # noqa: E402
from bench_complete import postgres  # noqa: E402
from tests.sandboxes.clean_cut import SURFACES, run_race  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--before", type=int, default=100, help="acknowledged writes before complete")
    parser.add_argument("--surface", action="append", choices=sorted(SURFACES), help="repeat; default all")
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--workers", type=int, default=None, help="API workers (default 2 on PostgreSQL)")
    args = parser.parse_args()
    names = args.surface or sorted(SURFACES)
    key = "vk_soak_" + uuid.uuid4().hex
    workers = args.workers or (2 if args.postgres else 1)
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    failures: list[str] = []
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="assay-soak-cut-")))
        database_url = stack.enter_context(postgres()) if args.postgres else None
        url, _ = stack.enter_context(
            assay_serve(
                folder / "data", key, database_url=database_url, workers=workers, log=folder / "serve.log"
            )
        )
        backend = f"PostgreSQL, {workers} workers" if args.postgres else f"SQLite, {workers} worker(s)"
        print(f"assay serve at {url} ({backend}); {args.writers} writers, complete after {args.before}")
        stop_at = time.monotonic() + args.minutes * 60
        round_no = 0
        while time.monotonic() < stop_at:
            name = names[round_no % len(names)]
            round_no += 1
            surface = SURFACES[name]
            writers = min(args.writers, surface.writers) if name == "files-sftp" else args.writers
            began = time.monotonic()
            try:
                history = run_race(url, key, surface, folder, before=args.before, writers=writers)
                history.check()
                verdict = "ok"
            except AssertionError as failed:
                verdict = "FAILED"
                failures.append(f"round {round_no} {name}: {str(failed).splitlines()[0]}")
                history = None
            took = time.monotonic() - began
            if history is not None:
                counts = totals[name]
                counts["rounds"] += 1
                counts["acknowledged"] += len(history.acknowledged)
                counts["graded"] += len(history.graded)
                counts["refused"] += len(history.refused)
                counts["unknown"] += len(history.unknown)
                print(f"round {round_no:3d} {verdict:6s} {took:5.1f} s  {history.summary()}", flush=True)
            else:
                print(f"round {round_no:3d} {verdict:6s} {took:5.1f} s  {failures[-1]}", flush=True)
    print("\ntotals")
    for name in sorted(totals):
        counts = totals[name]
        print(
            f"  {name:17s} {counts['rounds']:3d} rounds  {counts['acknowledged']:6d} acknowledged  "
            f"{counts['graded']:6d} graded  {counts['refused']:5d} refused  {counts['unknown']:4d} unknown"
        )
    for failure in failures:
        print(failure)
    print("PASS" if not failures else f"FAIL: {len(failures)} of {round_no} rounds")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
