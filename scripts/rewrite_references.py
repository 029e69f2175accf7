"""Rewrite the citations in source comments and docstrings that point outside the repository.

Comments and docstrings under `src/`, `bench/` and `scripts/` cite work items ("(issue 9)"),
diary entries ("session 10", `docs/performance.md` "Session 7"), sections of an external
specification ("SPEC §6") and a style guide that is not in the repository ("style.md"). This
script rewrites them in place: a specification section becomes the `docs/` page that now holds that
content, a work-item or diary citation is dropped (the reason beside it stays), and sentences the
generic rules would leave ungrammatical have their own exact rewrites.

Run it once from the repository root, then read the diff:

    uv run python scripts/rewrite_references.py          # rewrite, then `ruff format` what changed
    uv run python scripts/rewrite_references.py --check  # list what is left (file:line); exit 1 if any
    uv run python scripts/rewrite_references.py --with-tests [--check]  # tests/ as well

The rules are an ordered list applied to every `*.py` file, so they still apply after code moves
between files: the exact rewrites first (each names a whole phrase, wherever it now lives), then
the generic ones, repeated until nothing changes. A comment or docstring line the rewrite makes
longer than the line length is re-wrapped (ruff format does not wrap prose); a file that would no
longer parse is left alone and named, as is a changed string the code uses (an error message), for
a person to read. `CHECKS` holds the same patterns as `tests/docs/test_docs_reference.py`."""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("src", "bench", "scripts")
TEST_TREES = ("tests",)
# The test of the wording rule holds the forbidden phrases as samples.
SKIPPED = {"tests/docs/test_docs_reference.py"}
SELF = Path(__file__).resolve()
LINE_LENGTH = 110

CHECKS: dict[str, re.Pattern[str]] = {
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

# Where each section of the external specification now lives.
SECTION_PAGES: dict[str, str] = {
    "1": "docs/api.md",
    "1.1": "docs/api.md",
    "2": "docs/sandboxes.md",
    "3": "docs/assertions.md",
    "4": "docs/scoring.md",
    "5": "docs/api.md",
    "5.1": "docs/api.md",
    "5.2": "docs/api.md",
    "5.3": "docs/sandboxes.md",
    "6": "docs/snapshots.md",
    "7": "docs/deployment.md",
    "7.1": "docs/sdk.md",
    "8": "docs/sdk.md",
}

# The surfaces' own pages: under these folders the API sections (datasets, the run API) mean the
# surface behaviour that docs/sandboxes.md describes.
SURFACE_TREES = ("src/assay/sandboxes/", "src/assay/formats/", "tests/sandboxes/", "tests/formats/")
SURFACE_PAGES = {"5.1": "docs/sandboxes.md", "5.2": "docs/sandboxes.md"}

# docs/decisions.md is an index now; a citation of it goes to the area page that holds the decision,
# by where the citing code lives (first matching folder or file wins; elsewhere it stays the index).
DECISION_PAGES: list[tuple[str, str]] = [
    ("src/assay/checks/sftp_file_present.py", "docs/decisions/verification.md"),
    ("src/assay/checks/voice_transcript.py", "docs/decisions/voice.md"),
    ("src/assay/checks/_semantic.py", "docs/decisions/voice.md"),
    ("src/assay/formats/fhir/", "docs/decisions/fhir.md"),
    ("src/assay/sandboxes/fhir/external/", "docs/decisions/fhir-external.md"),
    ("src/assay/sandboxes/files/", "docs/decisions/files.md"),
    ("src/assay/sandboxes/hl7/", "docs/decisions/hl7.md"),
    ("src/assay/service/runs/", "docs/decisions/service.md"),
    ("src/assay/store/migrations/", "docs/decisions/service.md"),
]

PERFORMANCE_LOAD = '`docs/performance.md`, "The agent path under load"'


_surface_file = False
_decision_page = "docs/decisions.md"


def page(section: str) -> str:
    """The page for one section number: its own entry, else its chapter's (`3.6` → `3`)."""
    if _surface_file and section in SURFACE_PAGES:
        return SURFACE_PAGES[section]
    return SECTION_PAGES.get(section) or SECTION_PAGES[section.split(".")[0]]


_SECTION = r"§\d+(?:\.\d+)*(?:[ \t]+Order)?"
_SECTIONS = rf"{_SECTION}(?:[ \t]*(?:,|–|-|[ \t]and)[ \t]*§?\d+(?:\.\d+)*(?:[ \t]+Order)?)*"


def pages(sections: str) -> str:
    """`§2, §5.1–§5.3, §6` → the distinct pages those sections live on, in order, comma-joined."""
    found: list[str] = []
    for number in re.findall(r"(?<![\d.])(\d+(?:\.\d+)*)", sections):
        target = page(number)
        if target not in found:
            found.append(target)
    return ", ".join(found)


Replacement = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True)
class Rule:
    """One rewrite: an exact phrase (`pattern` a `str`) or a regular expression, and what replaces it."""

    pattern: str | re.Pattern[str]
    replacement: Replacement

    def apply(self, text: str) -> str:
        if isinstance(self.pattern, str):
            assert isinstance(self.replacement, str)
            return text.replace(self.pattern, self.replacement)
        return self.pattern.sub(self.replacement, text)


def exact(old: str, new: str) -> Rule:
    return Rule(old, new)


def regex(pattern: str, replacement: Replacement, flags: int = 0) -> Rule:
    return Rule(re.compile(pattern, flags), replacement)


# Continuation inside a comment or docstring: a line break, indentation and an optional `# `.
_BREAK = r"\s*(?:\n\s*#\s*)?"

SPECIFIC: list[Rule] = [
    # Sentences the generic rules would leave ungrammatical or empty.
    exact("before issue 9\nsession 8 (", "before the event\nlog's COPY writer ("),
    exact(
        "the code before\nissue 15 (`git worktree add /tmp/old a999672`) to compare.",
        "the code before\nthe FHIR fidelity work (`git worktree add /tmp/old a999672`) to compare.",
    ),
    exact("(issue 9's fault test found this)", "(a fault test that kills the main process shows it)"),
    exact("; issue 9: under agent load", ": under agent load"),
    exact("Issue 9 (big datasets): the encoder", "For big datasets the encoder"),
    exact("(structural checks only, as before\nissue 15)", "(structural checks only)"),
    exact("the structural checks only, as before\nissue 15).", "the structural checks only)."),
    exact("(a runtime dependency since issue 15)", "(a runtime dependency)"),
    exact(
        "(style.md, after\npython-hl7's `create_parse_plan`)", "(as python-hl7's `create_parse_plan` does)"
    ),
    exact(
        "(style.md, after\n  python-hl7's `create_parse_plan`)", "(as python-hl7's `create_parse_plan` does)"
    ),
    exact(
        "(style.md,\nafter python-hl7's `Accessor.parse_key`)",
        "(as python-hl7's\n`Accessor.parse_key` is)",
    ),
    exact("(style.md, after Inspect's re-scoring of logs)", "(as Inspect re-scores its logs)"),
    exact(" (style.md, Polar's\n`get_readable_statement`)", " (as Polar's\n`get_readable_statement` does)"),
    exact(" (style.md, Polar's `get_readable_statement`)", " (as Polar's `get_readable_statement` does)"),
    exact(
        "SPEC §2 (what `fhir-resource-state` reads), §5.1 (dataset loading), §5.2 (the REST surface),\n"
        "§6 (captures as a pointer: store id + sequence number).",
        "What `fhir-resource-state` reads, dataset loading and the REST surface: docs/sandboxes.md;\n"
        "captures as a pointer (store id + sequence number): docs/snapshots.md.",
    ),
    exact("(one sandbox per surface, SPEC\n§1)", "(one sandbox per\nsurface)"),
    exact(
        "reference-type filter (SPEC\n§3.2, `resolve() is X` rewritten)",
        "reference-type filter\n(`resolve() is X` rewritten)",
    ),
    exact("(`ASSAY_FHIR_URL`,\nSPEC §7)", "(`ASSAY_FHIR_URL`,\ndocs/deployment.md)"),
    exact("(SPEC §2, §7: `ASSAY_FHIR_URL`)", "(`ASSAY_FHIR_URL`, docs/deployment.md)"),
    exact(
        "(SPEC §5.2: listeners run once per deployment)",
        "(docs/deployment.md: listeners run once per deployment)",
    ),
    exact("(SPEC is silent)", "(a choice: no rule covers it)"),
    exact("tried in SPEC order", "tried in the documented order"),
    exact("(SPEC: `<prefix><ULID>`", "(docs/api.md: `<prefix><ULID>`"),
    exact("(SPEC §1.1 types `file_upload`", "(types `file_upload`"),
    exact("(SPEC §3.6 replaces punctuation", "(`voice-transcript` replaces punctuation"),
    exact("(SPEC §3.6, tier 1)", "(tier 1 in docs/assertions.md)"),
    exact('"""SPEC §3.6\'s negations;', '"""The negations `voice-transcript` knows (docs/assertions.md);'),
    exact('"""SPEC §3.6\'s tiers,', '"""The match tiers of `voice-transcript` (docs/assertions.md),'),
    exact("The SPEC §3.1 matched sentence", "The matched sentence (docs/assertions.md)"),
    exact("of a SPEC §3.5 glob", "of a `sftp-file-present` glob"),
    exact("SPEC §3.7 reads it at", "`x12-response` reads it at"),
    exact("as SPEC §5.3 says a payer answers.", "as a payer answers (docs/sandboxes.md)."),
    exact("The payer definition of SPEC §5.3,", "The payer definition (docs/sandboxes.md),"),
    exact("acknowledgment of SPEC §5.2,", "acknowledgment (docs/sandboxes.md),"),
    exact("with SPEC §5.2 ACKs", "with ACKs (docs/sandboxes.md)"),
    exact("(the SPEC §6 final state", "(the final state"),
    exact("The steps SPEC §5.3 names", "The scenario steps docs/sandboxes.md names"),
    exact("SPEC §5.3, in task order", "in task order"),
    exact("in SPEC §5.1 order", "in order"),
    exact("maps them to SPEC §5 in one place", "maps them to the error codes of docs/api.md in one place"),
    exact("maps each to SPEC §5 once", "maps each to an error code of docs/api.md once"),
    exact("mapped to SPEC §5 codes", "mapped to the error codes of docs/api.md"),
    exact("no gateway code in SPEC §5's list", "no gateway code among the error codes of docs/api.md"),
    exact("The SPEC §5 error for", "The API error (docs/api.md) for"),
    exact("one class per SPEC §5 error code", "one class per error code of docs/api.md"),
    exact("SPEC §6 stores one resource", "A snapshot stores one resource"),
    exact("(issue 9: big datasets)", "(for big datasets)"),
    exact("(issue 9: the agent path)", "(for the agent path)"),
    exact("(session 9:", "(measured:"),
    # In tests/ (`--with-tests`).
    exact("the SPEC guards applied", "the documented guards applied"),
    exact("its single started task run too (SPEC §5.2)", "its single started task run too"),
    exact(
        "(SPEC §1.1 `seq`; §5: event\nlists oldest first)",
        "(`seq`; event lists\nare oldest first: docs/api.md)",
    ),
    exact("captures (§6)", "captures (docs/snapshots.md)"),
    exact("the base were the §5 envelope", "the base were the API's envelope"),
    exact("SPEC §5.3's required keys", "the required keys of docs/sandboxes.md"),
    exact("`assay verify` (SPEC §3.2, §7)", "`assay verify` (docs/assertions.md, docs/sdk.md)"),
    exact('"""SPEC §5.1 rewrites', '"""Dataset loading rewrites'),
    exact('"""SPEC §5.1 keeps', '"""Dataset loading keeps'),
    regex(r"[ \t]*\(issues?[ \t]+\d+,[ \t]+items?[ \t]+[^)\n]*\)", ""),
    exact("(issue 15; issue 5's strict mode made the default)", "(strict mode is the default)"),
    exact("Write interactions of issue 15 (items 4–6):", "Write interactions:"),
    exact("(orjson's since issue 9)", "(orjson's)"),
    exact("Issue 9's reproduction, bounded:", "The agent-load reproduction, bounded:"),
    exact("(holding no lock, issue 9: big\n    # datasets)", "(holding no lock, for big\n    # datasets)"),
    exact("(SPEC §5.2's\ninteractions)", "(the interactions\ndocs/sandboxes.md lists)"),
    exact("— SPEC §5.1 loading", "— dataset loading (docs/sandboxes.md)"),
    exact("One SPEC §5.3 scenario step", "One scenario step (docs/sandboxes.md)"),
    # A citation that opens a line, its sentence ending right after it: the punctuation moves up.
    regex(
        r"(\S)([ \t]*\n[ \t]*(?:#[ \t]*)?)\((?:issues?|sessions?)[ \t]+\d+\)([.,;:])[ \t]?",
        r"\1\3\2",
        re.I,
    ),
    regex(
        r"((?:recency|arrival|insertion) order[^()\n]{0,25}?)\(SPEC[ \t]+§2([):;])",
        r"\1(docs/snapshots.md\2",
    ),
    regex(r"\(SPEC[ \t]+§2([ \t]+recency order|:[ \t]+`uploaded_at`)", r"(docs/snapshots.md\1"),
    regex(r"(?:the )?(?:recency|arrival) order of SPEC[ \t]+§2", "the recency order of docs/snapshots.md"),
    exact("order SPEC §2 calls recency", "order docs/snapshots.md calls recency"),
    regex(r"(natural-language|legacy eval|LLM judge)([^\n§]{0,70}?)SPEC[ \t]+§8", r"\1\2docs/assertions.md"),
]
GENERIC: list[Rule] = [
    # A docstring that opens with a citation.
    regex(
        rf'"""SPEC[ \t]+({_SECTIONS})[ \t]+(`[^`\n]+`)\.',
        lambda m: f'"""The scenario step {m.group(2)} ({pages(m.group(1))}).',
    ),
    regex(
        rf'"""SPEC[ \t]+({_SECTIONS})[ \t]+([a-z][a-z ]*?):',
        lambda m: f'"""{m.group(2)[0].upper()}{m.group(2)[1:]} ({pages(m.group(1))}):',
    ),
    regex(rf'"""SPEC[ \t]+{_SECTIONS}[:.][ \t]+(\w|`)', lambda m: f'"""{m.group(1).upper()}'),
    # The external specification, by section.
    regex(rf"\(SPEC[ \t]+({_SECTIONS})\)", lambda m: f"({pages(m.group(1))})"),
    regex(rf"\(SPEC[ \t]+({_SECTIONS})([:;,])", lambda m: f"({pages(m.group(1))}{m.group(2)}"),
    regex(rf",[ \t]+SPEC[ \t]+({_SECTIONS})\)", lambda m: f", {pages(m.group(1))})"),
    regex(rf";[ \t]+SPEC[ \t]+({_SECTIONS})\)", lambda m: f"; {pages(m.group(1))})"),
    regex(
        rf"\(SPEC[ \t]+({_SECTIONS})[ \t]+([a-z`][^():;,\n]*?)\)",
        lambda m: f"({m.group(2)} in {pages(m.group(1))})",
    ),
    regex(r"SPEC[ \t]+§6[ \t]+(?=snapshot)", ""),
    regex(r"SPEC[ \t]+§6[ \t]+(layout|sidecar|tar\.gz|entries)", r"snapshot \1"),
    regex(
        rf"the SPEC[ \t]+({_SECTIONS})[ \t]+((?:[a-z]+ )?(?:rules?|grammar|envelope|codes?|error))\b",
        lambda m: f"the {m.group(2)} of {pages(m.group(1))}",
    ),
    regex(rf"SPEC[ \t]+({_SECTIONS})'s[ \t]+(\w+)", lambda m: f"the {m.group(2)} of {pages(m.group(1))}"),
    regex(rf"SPEC[ \t]+({_SECTIONS})", lambda m: pages(m.group(1))),
    # Work items: drop the citation, keep the reason beside it.
    regex(r"[ \t]*\(issues?[ \t]+\d+(?:[ \t]+§\d+(?:\.\d+)*)?(?:[ \t]+(?:regression|review))?\)", ""),
    regex(r"\((?:issues?[ \t]+\d+(?:[ \t]+§\d+(?:\.\d+)*)?)(?::|,|;)[ \t]*", "("),
    regex(r"[,;][ \t]*issues?[ \t]+\d+(?:[ \t]+§\d+(?:\.\d+)*)?(?=[);])", ""),
    # The decisions index: the area page instead.
    regex(r"(?<![\w/])docs/decisions\.md", lambda _: _decision_page),
    # Diary entries.
    regex(r"`?docs/performance\.md`?,?[ \t]+\"(?:Session|Issue)[ \t]+\d+\"", PERFORMANCE_LOAD),
    regex(r"[ \t]*\(sessions?[ \t]+\d+\)", ""),
    regex(r"\(sessions?[ \t]+\d+:[ \t]*", "("),
    # The style guide: the principle it names stays, the file name goes.
    regex(r"[ \t]*\(style\.md,[ \t]+\"[^\"]*\"\)", ""),
    regex(r"\(style\.md:[ \t]*", "("),
    regex(r"\(style\.md,[ \t]+after[ \t]+", "(modelled on "),
]

RULES: list[Rule] = SPECIFIC + GENERIC


def rewrite(text: str, name: str = "") -> str:
    """`text` with every rule applied in order; `name` (the path from the root) picks surface pages."""
    global _surface_file, _decision_page
    _surface_file = name.startswith(SURFACE_TREES)
    _decision_page = next(
        (target for where, target in DECISION_PAGES if name.startswith(where)), "docs/decisions.md"
    )
    for _ in range(3):  # until nothing changes: one rule's output can be another's input
        before = text
        for rule in RULES:
            text = rule.apply(text)
        if text == before:
            break
    return text


def files(with_tests: bool = False) -> list[Path]:
    trees = TREES + TEST_TREES if with_tests else TREES
    found = {
        path
        for tree in trees
        for path in (ROOT / tree).rglob("*.py")
        if path.resolve() != SELF and path.relative_to(ROOT).as_posix() not in SKIPPED
    }
    return sorted(found)


def remaining(path: Path) -> list[str]:
    name = path.relative_to(ROOT).as_posix()
    return [
        f"{name}:{number}: {what}: {line.strip()[:120]}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for what, pattern in CHECKS.items()
        if pattern.search(line)
    ]


def prose_lines(text: str) -> set[int]:
    """0-based numbers of the lines that are comment or triple-quoted string text (safe to re-wrap)."""
    found: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and not token.line[: token.start[1]].strip():
                found.add(token.start[0] - 1)  # a whole-line comment; a trailing one is left long
            elif token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''")):
                found.update(range(token.start[0] - 1, token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return set()
    return found


_WRAP_SKIP = re.compile(r"\s*(?:$|[-*] |>>>|\d+\. |\"\"\"\s*$)")


def rewrap(text: str, before: str) -> str:
    """Wrap the comment and docstring lines the rewrite made longer than `LINE_LENGTH`: the words
    past the limit move to the start of the next line of the same paragraph, or onto a new line."""
    old_long = {line for line in before.splitlines() if len(line) > LINE_LENGTH}
    lines = text.split("\n")
    prose = prose_lines(text)
    number = 0
    while number < len(lines):
        line = lines[number]
        if len(line) <= LINE_LENGTH or line in old_long or number not in prose:
            number += 1
            continue
        cut = line.rfind(" ", 0, LINE_LENGTH + 1)
        indent = len(line) - len(line.lstrip())
        comment = re.match(r"[ \t]*#[ \t]?", line)
        prefix = comment.group(0) if comment else " " * indent
        if cut <= len(prefix):
            number += 1
            continue
        head, tail = line[:cut].rstrip(), line[cut + 1 :].lstrip()
        lines[number] = head
        following = lines[number + 1] if number + 1 < len(lines) else None
        same_paragraph = (
            following is not None
            and number + 1 in prose
            and following.startswith(prefix)
            and not following[len(prefix) :].startswith(" ")
            and not _WRAP_SKIP.match(following[len(prefix) :])
            and (comment is not None) == following.lstrip().startswith("#")
        )
        if same_paragraph and following is not None:
            lines[number + 1] = f"{prefix}{tail} {following[len(prefix) :]}"
        else:
            lines.insert(number + 1, f"{prefix}{tail}")
            prose = {n + 1 if n > number else n for n in prose} | {number + 1}
        number += 1
    return "\n".join(lines)


def literals(text: str) -> list[str]:
    """The string constants of a module that are not docstrings (an error message, a description)."""
    tree = ast.parse(text)
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return sorted(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare
    )


def long_lines(path: Path, before: str) -> list[str]:
    """Lines the rewrite left longer than the line length that `rewrap` could not wrap."""
    old = {line for line in before.splitlines() if len(line) > LINE_LENGTH}
    name = path.relative_to(ROOT).as_posix()
    return [
        f"{name}:{number}: {len(line)} characters"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > LINE_LENGTH and line not in old
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="rewrite nothing; list what is left, exit 1 if any"
    )
    parser.add_argument(
        "--with-tests", action="store_true", help="tests/ too (their comments and docstrings)"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = [problem for path in files(args.with_tests) for problem in remaining(path)]
        print("\n".join(problems) if problems else "no references left")
        return 1 if problems else 0
    changed: list[Path] = []
    too_long: list[str] = []
    for path in files(args.with_tests):
        before = path.read_text(encoding="utf-8")
        after = rewrap(rewrite(before, path.relative_to(ROOT).as_posix()), before)
        if after != before:
            try:
                compile(after, str(path), "exec")
            except SyntaxError as error:  # a rule matched code: leave the file for a person
                name = path.relative_to(ROOT).as_posix()
                too_long.append(f"{name}: not rewritten, it would not parse ({error})")
                continue
            path.write_text(after, encoding="utf-8")
            changed.append(path)
            if literals(after) != literals(before):
                print(
                    f"check: {path.relative_to(ROOT).as_posix()}: a string the code uses (not a docstring) changed"
                )
            too_long += long_lines(path, before)
    if changed:
        subprocess.run([sys.executable, "-m", "ruff", "format", *map(str, changed)], cwd=ROOT, check=True)
    print(f"rewrote {len(changed)} files")
    for line in too_long:
        print(f"for a person: {line}")
    problems = [problem for path in files(args.with_tests) for problem in remaining(path)]
    for problem in problems:
        print(problem)
    return 1 if problems or too_long else 0


if __name__ == "__main__":
    sys.exit(main())
