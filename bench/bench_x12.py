"""X12 005010 benchmark: parsing against pyx12, and our loop resolution on 271/277/278.

    uv run python bench/bench_x12.py [--rounds N]

Part 1 — the 005010 files pyx12 4.0 has maps for: every fixture whose GS08/ST03 is 005010X222A1
(837P) or 005010X221A1 (835) and that pyx12 reads without raising. What each side does:

- assay `parse_x12`: tokenize with the ISA's delimiters, build the envelope tree (interchange →
  groups → transaction sets → segments) and check SE/GE/IEA counts and control numbers.
- assay `parse_x12` + `.loops`: the same, plus the loop tree of every transaction set from our
  837P/837I/835 tables (HL hierarchy and loop triggers; no element validation).
- pyx12 `X12ContextReader.iter_segments()`: tokenize, then walk each segment through the
  implementation guide's XML map, validating segments and elements and building the loop tree
  (2000A/2300/2400 …) node by node. It validates while parsing, so it does strictly more.
- pyx12 `X12Reader`: its bare tokenizer (segments only, no map, no tree) — the like-for-like
  floor: how our whole parse compares with its cheapest pass.

Target: assay ≥ 20x pyx12's segments/s against the map-driven tree reader.

Part 2 — our full parse + loop resolution (HL hierarchy and guide triggers) on the 270/271,
276/277 and 278 fixtures: absolute segments/s (pyx12 has no 005010 maps for these).

Best of N rounds (default 5) per implementation; every file parsed from its text each round.
"""

from __future__ import annotations

import argparse
import io
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyx12.error_handler
import pyx12.params
import pyx12.x12context
import pyx12.x12file

from assay.formats.x12 import X12ParseError, parse_x12

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "x12"
PYX12_GUIDES = ("005010X222A1", "005010X221A1")
LOOP_CODES = ("270", "271", "276", "277", "278")


def _texts() -> list[tuple[Path, str]]:
    found = []
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix != ".csv"):
        text = path.read_bytes().decode("utf-8", "replace")
        try:
            parse_x12(text)
        except X12ParseError:
            continue
        found.append((path, text))
    return found


def _pyx12_workload(texts: Sequence[tuple[Path, str]]) -> list[str]:
    work = []
    for _, text in texts:
        document = parse_x12(text)
        if not all(t.guide in PYX12_GUIDES for t in document.transactions()):
            continue
        if not any(True for _ in document.transactions()):
            continue
        try:
            _pyx12_tree(text)
        except Exception:  # pyx12 refuses some malformed samples; they are left out of both sides
            continue
        work.append(text)
    return work


def _loop_workload(texts: Sequence[tuple[Path, str]]) -> list[str]:
    return [
        text
        for _, text in texts
        if (codes := {t.code for t in parse_x12(text).transactions()}) and codes <= set(LOOP_CODES)
    ]


def _assay_parse(text: str) -> int:
    return sum(len(t.segments) for t in parse_x12(text).transactions())


def _assay_parse_and_loops(text: str) -> int:
    count = 0
    for transaction in parse_x12(text).transactions():
        transaction.loops  # noqa: B018 - resolving the loop tree is the work measured
        count += len(transaction.segments)
    return count


def _count_all(text: str) -> int:
    return sum(1 for _ in parse_x12(text).segments())


def _count_with_loops(text: str) -> int:
    document = parse_x12(text)
    for transaction in document.transactions():
        transaction.loops  # noqa: B018 - resolving the loop tree is the work measured
    return sum(1 for _ in document.segments())


def _pyx12_tree(text: str) -> int:
    param = pyx12.params.params()
    errh = pyx12.error_handler.errh_null()
    reader = pyx12.x12context.X12ContextReader(param, errh, io.StringIO(text))
    return sum(1 for _ in reader.iter_segments())


def _pyx12_tokens(text: str) -> int:
    return sum(1 for _ in pyx12.x12file.X12Reader(io.StringIO(text)))


def _best(run: Callable[[str], int], work: Sequence[str], rounds: int) -> tuple[float, int]:
    best, segments = float("inf"), 0
    for _ in range(rounds):
        start = time.perf_counter()
        segments = sum(run(text) for text in work)
        best = min(best, time.perf_counter() - start)
    return best, segments


def _segment_count(work: Sequence[str]) -> int:
    return sum(sum(1 for _ in parse_x12(text).segments()) for text in work)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    texts = _texts()
    pyx12_work = _pyx12_workload(texts)
    loop_work = _loop_workload(texts)
    print(f"python {platform.python_version()} on {platform.machine()}, {args.rounds} rounds, best of")

    segments = _segment_count(pyx12_work)
    print(f"\n837P X222A1 + 835 X221A1: {len(pyx12_work)} files, {segments} segments (ISA…IEA)")
    rates = {}
    for name, run in (
        ("assay parse_x12 (envelope tree + counts)", _count_all),
        ("assay parse_x12 + loop tree", _count_with_loops),
        ("pyx12 X12ContextReader (map-validated loop tree)", _pyx12_tree),
        ("pyx12 X12Reader (bare tokenizer)", _pyx12_tokens),
    ):
        seconds, _ = _best(
            run, pyx12_work, args.rounds if "Context" not in name else max(1, args.rounds // 2)
        )
        rates[name] = segments / seconds
        print(f"  {name:<52} {seconds * 1000:9.1f} ms  {rates[name]:>12,.0f} segments/s")
    ours = rates["assay parse_x12 (envelope tree + counts)"]
    tree = rates["pyx12 X12ContextReader (map-validated loop tree)"]
    tokens = rates["pyx12 X12Reader (bare tokenizer)"]
    with_loops = rates["assay parse_x12 + loop tree"]
    print(f"  ratio assay / pyx12 tree reader : {ours / tree:6.1f}x  (target >= 20x)")
    print(f"  ratio assay+loops / pyx12 tree  : {with_loops / tree:6.1f}x")
    print(f"  ratio assay / pyx12 tokenizer   : {ours / tokens:6.1f}x")

    # pyx12 loads its XML map for every reader; on the largest file that cost is amortized.
    largest = max(pyx12_work, key=len)
    big_segments = _segment_count([largest])
    print(f"\nlargest file alone ({big_segments} segments, map loading amortized):")
    big = {}
    for name, run in (
        ("assay parse_x12", _count_all),
        ("assay parse_x12 + loop tree", _count_with_loops),
        ("pyx12 X12ContextReader", _pyx12_tree),
    ):
        seconds, _ = _best(run, [largest], max(1, args.rounds // 2) if "pyx12" in name else args.rounds)
        big[name] = big_segments / seconds
        print(f"  {name:<52} {seconds * 1000:9.1f} ms  {big[name]:>12,.0f} segments/s")
    pyx12_big = big["pyx12 X12ContextReader"]
    print(f"  ratio assay / pyx12 tree reader : {big['assay parse_x12'] / pyx12_big:6.1f}x")
    print(f"  ratio assay+loops / pyx12 tree  : {big['assay parse_x12 + loop tree'] / pyx12_big:6.1f}x")

    seconds, transaction_segments = _best(_assay_parse_and_loops, loop_work, args.rounds)
    parse_only, _ = _best(_assay_parse, loop_work, args.rounds)
    print(
        f"\n270/271/276/277/278: {len(loop_work)} files, {transaction_segments} segments in transaction sets"
    )
    print(
        f"  assay parse + loop resolution  {seconds * 1000:9.2f} ms  {transaction_segments / seconds:>12,.0f} segments/s"
    )
    print(
        f"  assay parse only               {parse_only * 1000:9.2f} ms  {transaction_segments / parse_only:>12,.0f} segments/s"
    )
    print(f"  loop resolution share          {(seconds - parse_only) / seconds:9.0%}")


if __name__ == "__main__":
    sys.exit(main())
