"""Which of `duplicates`' pairs in `src/` are declared boilerplate, and which are left to fold.

    duplicates --repo src --most 200 --seconds 120 | uv run python scripts/duplicates_report.py

`duplicates` (the workplace's clone finder) lists every pair of places sharing six or more lines,
the same lines or lines of the same shape with other names. Most pairs in this tree are not logic
written twice, so they are declared here by kind, each with its reason
(docs/architecture.md, "Duplicates"):

- **tool-marked**: rows the tool itself marks `boilerplate` (what they share is punctuation,
  keywords or a shape common across a folder).
- **migrations**: Alembic revisions are frozen history; each restates the tables it creates.
- **SDK twins**: `assay/client/` offers each call synchronously and asynchronously with the same
  body; one generated from the other would hide the signatures users read.
- **declarations**: both sides are at least 90 % declaration lines (a dataclass or model with its
  typed fields, docstrings, imports, `__all__`): alike in shape, unrelated in meaning.

Everything else is printed as left to fold. The row format is the tool's:
`D1 a.py:10-24 ~ b.py:40-54 [shape] [boilerplate] (+N more runs)`.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
ROW = re.compile(r"(D\d+) (\S+):(\d+)-(\d+) ~ (\S+):(\d+)-(\d+)(.*)")
DECLARATION = re.compile(
    r"""^\s*(@dataclass|class \w+|[A-Za-z_]\w*\s*:\s*[^=]+(=.*)?$|[A-Za-z_]\w*\s*=\s*|\"\"\"|"|#|"""
    r"""from |import |__all__|[)\]]|$)"""
)


def kind(row: re.Match[str]) -> str:
    _, left, left_from, left_to, right, right_from, right_to, rest = row.groups()
    if "boilerplate" in rest:
        return "tool-marked"
    if "/migrations/" in left and "/migrations/" in right:
        return "migrations"
    if left.startswith("assay/client/") and right.startswith("assay/client/"):
        return "SDK twins"
    lines: list[str] = []
    for path, first, last in ((left, left_from, left_to), (right, right_from, right_to)):
        lines += (ROOT / path).read_text().splitlines()[int(first) - 1 : int(last)]
    declared = sum(bool(DECLARATION.match(line)) for line in lines)
    return "declarations" if declared >= 0.9 * len(lines) else "to fold"


def main() -> None:
    rows = [match for line in sys.stdin if (match := ROW.match(line.strip()))]
    kinds = {row.group(1): kind(row) for row in rows}
    counts = Counter(kinds.values())
    print(f"{len(rows)} pairs: " + ", ".join(f"{counts[k]} {k}" for k in sorted(counts)))
    for row in rows:
        if kinds[row.group(1)] == "to fold":
            print("  " + row.group(0))


if __name__ == "__main__":
    main()
