"""HL7v2 benchmark: parse + 20 path reads per message, against hl7apy and python-hl7.

    uv run python bench/bench_hl7.py [--rounds N]

Workload: every message in `tests/fixtures/hl7v2/**` that parses (batches split), each parsed
from its raw text and read at 20 leaf positions spread across the message (paths parsed once, as
an assertion does). Compared against

- hl7apy (`parse_message(find_groups=False, validation_level=TOLERANT)`, then the same 20 reads by
  walking its element tree): the target is assay ≥ 20x faster;
- bare python-hl7 (`hl7.parse` of the CR-normalised text, no reads), with its own containers and
  with the plain-list factory we hand it: the overhead our layer adds (input normalisation, batch
  split, delimiter checks, segment index, reads, escape decoding).

Best of N rounds (default 5) per implementation; prints per-message times and ratios.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hl7
from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.parser import parse_message as hl7apy_parse

from assay.formats.hl7 import Hl7ParseError, Hl7Path, parse_messages
from assay.formats.hl7._reader import _ListFactory

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hl7v2"
READS = 20


def _workload() -> list[tuple[str, list[Hl7Path]]]:
    """(raw message text with CR segment ends, 20 leaf paths present in it) per message."""
    work = []
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file()):
        try:
            messages = parse_messages(path.read_bytes())
        except Hl7ParseError:
            continue
        for message in messages:
            leaves = _leaves(message.text, message.delimiters.field, message.delimiters)
            step = max(1, len(leaves) // READS)
            work.append((message.text, [Hl7Path.parse(p) for p in leaves[::step][:READS]]))
    return work


def _leaves(text: str, field_sep: str, d: Any) -> list[str]:
    leaves: list[str] = []
    seen: dict[str, int] = {}
    for line in text.split("\r"):
        segment = line[:3]
        seen[segment] = occurrence = seen.get(segment, 0) + 1
        for f, field in enumerate(line.split(field_sep)[1:], 1):
            number = f + 1 if segment == "MSH" else f
            if segment == "MSH" and f == 1:
                continue
            for r, rep in enumerate(field.split(d.repetition), 1):
                for c, comp in enumerate(rep.split(d.component), 1):
                    for s, sub in enumerate(comp.split(d.subcomponent), 1):
                        if sub:
                            leaves.append(f"{segment}[{occurrence}].{number}[{r}].{c}.{s}")
    return leaves


def run_assay(work: Sequence[tuple[str, list[Hl7Path]]]) -> int:
    found = 0
    for text, paths in work:
        for message in parse_messages(text):
            for path in paths:
                found += message.read(path).found
    return found


def run_assay_parse_only(work: Sequence[tuple[str, list[Hl7Path]]]) -> int:
    return sum(len(parse_messages(text)) for text, _ in work)


def run_python_hl7(work: Sequence[tuple[str, list[Hl7Path]]]) -> int:
    return sum(len(hl7.parse(text)) for text, _ in work)


def run_python_hl7_lists(work: Sequence[tuple[str, list[Hl7Path]]]) -> int:
    return sum(len(hl7.parse(text, factory=_ListFactory)) for text, _ in work)


def run_hl7apy(work: Sequence[tuple[str, list[Hl7Path]]]) -> int:
    found = 0
    for text, paths in work:
        message = hl7apy_parse(text, find_groups=False, validation_level=VALIDATION_LEVEL.TOLERANT)
        for path in paths:
            found += _hl7apy_read(message, path) is not None
    return found


def _hl7apy_read(message: Any, path: Hl7Path) -> str | None:
    segments = [s for s in message.children if s.name == path.segment]
    if len(segments) < path.occurrence:
        return None
    name = f"{path.segment}_{path.field}"
    fields = [f for f in segments[path.occurrence - 1].children if f.name == name]
    if len(fields) < path.repetition:
        return None
    node = fields[path.repetition - 1]
    for position in (path.component, path.subcomponent):
        if position is None:
            break
        numbered = [c for c in node.children if (c.name or "").rsplit("_", 1)[-1].isdigit()]
        if not numbered:
            if position != 1:
                return None
            continue
        match = [c for c in numbered if int(c.name.rsplit("_", 1)[-1]) == position]
        if not match:
            return None
        node = match[0]
    return str(node.to_er7())


def _hl7apy_parses(text: str) -> bool:
    try:
        hl7apy_parse(text, find_groups=False, validation_level=VALIDATION_LEVEL.TOLERANT)
    except Exception:  # hl7apy rejects some versions and structures; those are left out
        return False
    return True


def best(fn: Callable[[Any], int], work: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(work)
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    work = _workload()
    common = [item for item in work if _hl7apy_parses(item[0])]
    reads = sum(len(paths) for _, paths in work)
    print(f"python {platform.python_version()} on {platform.machine()}, hl7 {hl7.__version__}")
    print(f"{len(work)} messages, {reads} reads; {len(common)} messages hl7apy also parses")
    ours_all = best(run_assay, work, args.rounds)
    ours_parse = best(run_assay_parse_only, work, args.rounds)
    bare_all = best(run_python_hl7, work, args.rounds)
    lists_all = best(run_python_hl7_lists, work, args.rounds)
    ours_common = best(run_assay, common, args.rounds)
    apy_common = best(run_hl7apy, common, max(1, args.rounds // 2))
    per = 1e6 / len(work)
    print(f"all {len(work)} messages, best of {args.rounds} rounds, us/message:")
    print(f"  assay parse + {READS} reads             {ours_all * per:9.1f}")
    print(f"  assay parse only                   {ours_parse * per:9.1f}")
    print(f"  python-hl7 parse (its containers)  {bare_all * per:9.1f}")
    print(f"  python-hl7 parse (our list factory){lists_all * per:9.1f}")
    print(f"  -> assay parse + {READS} reads / bare python-hl7 parse: {ours_all / bare_all:.2f}x")
    print(
        f"  -> our layer over python-hl7 with the same factory: +{100 * (ours_all / lists_all - 1):.0f}%"
        f" (parse only +{100 * (ours_parse / lists_all - 1):.0f}%)"
    )
    per_common = 1e6 / len(common)
    print(f"{len(common)} messages hl7apy parses, us/message:")
    print(f"  assay parse + {READS} reads             {ours_common * per_common:9.1f}")
    print(f"  hl7apy parse + {READS} reads            {apy_common * per_common:9.1f}")
    print(f"  -> assay is {apy_common / ours_common:.1f}x faster than hl7apy (target >= 20x)")


if __name__ == "__main__":
    sys.exit(main())
