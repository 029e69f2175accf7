"""`sftp-file-present`: a file was uploaded, optionally with the expected content (docs/assertions.md).

Candidates are the files of the final SFTP tree whose path equals `path` or matches the glob
`path_pattern`, leaving out files seeded by datasets or scenarios unless `include_seeded`. A `key`
field reads the file's metadata sidecar (`FileRecord.sidecar()`); a `path` field reads the parsed
JSON content, so it needs `parse_json` and a file that parses — otherwise that one field fails with
the reason, and the other fields are still judged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from assay.checks._context import CheckContext
from assay.checks._fields import absent_entries, judge_fields, no_match_details
from assay.checks._select import Judged, choose
from assay.core.assertions import SftpField, SftpFilePresent
from assay.core.operators import compile_pattern
from assay.core.results import CriterionResult
from assay.core.state import FileRecord, SandboxState
from assay.core.values import Reading, read_dotted, read_key

__all__ = ["check", "glob_regex"]


def check(assertion: SftpFilePresent, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge the assertion on the files of `state`; never raises for bad data."""
    wanted, selector = _path_test(assertion)
    candidates = [
        file
        for file in state.files()
        if (assertion.include_seeded or not file.seeded) and wanted(file.path.lstrip("/"))
    ]
    matched_paths = sorted(file.path for file in candidates)
    selection = choose(candidates, lambda file: _judge(assertion, state, file), assertion.match)
    if selection is None:
        return CriterionResult.failed(
            no_match_details("file", selector),
            {"fieldResults": absent_entries(assertion.fields), "matchedPaths": matched_paths},
        )
    return selection.result(matchedPaths=matched_paths)


def _path_test(assertion: SftpFilePresent) -> tuple[Callable[[str], bool], str]:
    """A predicate on relative paths, and how details name it."""
    if assertion.path is not None:
        exact = assertion.path.lstrip("/")
        return (lambda path: path == exact), f"path {exact}"
    pattern = (assertion.path_pattern or "").lstrip("/")
    regex = compile_pattern(glob_regex(pattern))
    return (lambda path: regex.search(path) is not None), f"pattern {pattern}"


def glob_regex(pattern: str) -> str:
    """The anchored RE2 source of a `sftp-file-present` glob.

    `*` is any run of characters other than `/` (dotfiles included), `?` one such character,
    `**/` zero or more whole segments, and a trailing `**` everything below its folder. A `**`
    elsewhere (`a**b`) is a plain `*`. Every other character is literal, case-sensitive —
    there are no `[...]` classes or `{a,b}` alternatives (docs/decisions/verification.md). RE2 keeps matching
    linear however many `**/` a pattern stacks.
    """
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            at_segment_start = i == 0 or pattern[i - 1] == "/"
            if at_segment_start and pattern.startswith("**/", i):
                parts.append("(?:[^/]*/)*")
                i += 3
                continue
            if at_segment_start and i + 2 == len(pattern):
                parts.append("(?s:.*)")
                i += 2
                continue
            parts.append("[^/]*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(_literal(pattern[i]))
            i += 1
    return "^" + "".join(parts) + "$"


_REGEX_SPECIAL = frozenset("\\.^$*+?()[]{}|")


def _literal(char: str) -> str:
    return "\\" + char if char in _REGEX_SPECIAL else char


def _judge(assertion: SftpFilePresent, state: SandboxState, file: FileRecord) -> Judged:
    sidecar = file.sidecar()
    content = _LazyJson(state, file) if assertion.parse_json else None

    def read(field: SftpField) -> Reading | str:
        if field.key is not None:
            return read_key(sidecar, field.key)
        if content is None:
            return "a `path` field reads JSON content and needs parse_json: true"
        return content.read(field.path or "")

    judgment = judge_fields(assertion.fields, read)
    return Judged(
        target=file.path,
        score=judgment.score,
        passed=judgment.passed,
        total=judgment.total,
        evidence={"fieldResults": judgment.entries},
        errors=_unique(judgment.errors),
    )


class _LazyJson:
    """A file's parsed JSON, read at most once and only when a `path` field asks."""

    def __init__(self, state: SandboxState, file: FileRecord):
        self._state = state
        self._file = file
        self._loaded = False
        self._value: Any = None
        self._problem: str | None = None

    def read(self, path: str) -> Reading | str:
        if not self._loaded:
            self._load()
        if self._problem is not None:
            return self._problem
        return read_dotted(self._value, path)

    def _load(self) -> None:
        self._loaded = True
        try:
            data = self._state.read_file(self._file.path)
        except (OSError, KeyError) as exc:
            self._problem = f"could not read {self._file.path}: {exc}"
            return
        try:
            self._value = json.loads(data)
        except UnicodeDecodeError as exc:
            self._problem = (
                f"{self._file.path} is not UTF-8 text, so not JSON ({exc.reason} at byte {exc.start})"
            )
        except RecursionError:
            self._problem = f"{self._file.path} is JSON nested too deeply to read"
        except ValueError as exc:
            self._problem = f"{self._file.path} is not valid JSON ({exc})"


def _unique(errors: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(errors))
