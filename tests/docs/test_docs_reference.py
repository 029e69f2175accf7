"""The docs are reference, self-contained: no page cites a work item, a diary entry or a document
that is not in the repository, and every relative link in `docs/` leads to a file (and heading)
that exists.

`SCANNED` names the trees the wording rule covers: the docs, and the comments and docstrings of
`src/` and `bench/` (`scripts/rewrite_references.py` rewrote what they cited)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

SCANNED: list[tuple[str, str]] = [
    ("docs", "**/*.md"),
    (".", "README.md"),
    ("src", "**/*.py"),
    ("bench", "**/*.py"),
]
"""(folder under the repository root, glob) pairs whose files must not hold `FORBIDDEN` wording."""

LINKED: list[tuple[str, str]] = [("docs", "**/*.md"), (".", "README.md")]
"""Markdown files whose relative links must resolve."""

FORBIDDEN: dict[str, re.Pattern[str]] = {
    "a work item (issue N)": re.compile(r"\bissues? #?\d", re.I),
    "a diary entry (session N)": re.compile(
        r"(?<![-\w])session \d|(?<![-\w])sessions \d+\s*(?:[–-]|and)\s*\d", re.I
    ),
    "the external spec by section": re.compile(r"SPEC\s*§"),
    "the external spec": re.compile(r"\bSPEC\b"),
    "engineer talk": re.compile(r"\bengineers? [a-z]+\d*\)|\(engineer\b|\bthe lead's\b|\(lead\)", re.I),
    "the external spec file": re.compile(r"SPEC\.md"),
    "a style guide not in the repository": re.compile(r"\bstyle\.md"),
    "a path outside the repository": re.compile(r"\.\./shared\b"),
}

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _files(pairs: list[tuple[str, str]]) -> list[Path]:
    found = {path for folder, glob in pairs for path in (ROOT / folder).glob(glob) if path.is_file()}
    return sorted(found)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to `-`."""
    text = re.sub(r"`|\*\*|__", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(path: Path) -> list[str]:
    """Relative link targets of a Markdown file, outside code blocks and code spans."""
    text = _CODE.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
    targets = [a or b for a, b in _LINK.findall(text)]
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


@pytest.mark.parametrize("path", _files(SCANNED), ids=_name)
def test_no_page_points_outside_the_repository_or_at_its_history(path: Path) -> None:
    problems = [
        f"{_name(path)}:{number}: {what}: {line.strip()[:120]}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for what, pattern in FORBIDDEN.items()
        if pattern.search(line)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", _files(LINKED), ids=_name)
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in links(path):
        file_part, _, fragment = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif not destination.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment} in {_name(destination)}")
    assert not broken, f"{_name(path)}:\n" + "\n".join(broken)


def test_the_rules_catch_what_they_name(tmp_path: Path) -> None:
    """The patterns and the link check themselves: each forbidden phrase is caught, and a link to a
    missing file or heading is reported."""
    for sample in [
        "(issue 9)",
        "Session 7 (lead)",
        "sessions 6–7",
        "SPEC §5.1",
        "see SPEC.md",
        "style.md",
        "../shared/x",
    ]:
        assert any(p.search(sample) for p in FORBIDDEN.values()), sample
    for fine in ["an OperationOutcome issue per element", "20 sessions 0.44×", "--sessions 20", "the spec's"]:
        assert not any(p.search(fine) for p in FORBIDDEN.values()), fine
    page = tmp_path / "page.md"
    page.write_text("# A `Title`, here\n[ok](#a-title-here) [bad](#nope) [gone](missing.md) `[code](x.md)`\n")
    assert links(page) == ["#a-title-here", "#nope", "missing.md"]
    assert anchors(page) == {"a-title-here"}
