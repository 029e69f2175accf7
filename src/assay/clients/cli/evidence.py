"""What a failed criterion got wrong, read from its evidence: one line per failing field or phrase,
with the expected and the actual value (shared by `assay verify` and `assay runs show`).

Evidence keys are the checks' (`fieldResults`, `field_results`, `assertionResults`,
`phraseResults`); entries name what they located with `path`, `fhirpath`, `key` or `phrase`, as
the author wrote it. A gated task says which required criterion zeroed it (`gate_text`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from rich.text import Text

__all__ = ["FieldMiss", "failing_fields", "gate_text", "miss_text"]

_LOCATORS = ("path", "fhirpath", "key", "phrase")
_MAX = 80


@dataclass(frozen=True)
class FieldMiss:
    where: str
    expected: str
    actual: str
    operator: str | None = None


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _MAX else text[: _MAX - 1] + "…"


def _miss(entry: dict[str, Any]) -> FieldMiss:
    where = next((str(entry[key]) for key in _LOCATORS if entry.get(key) is not None), "?")
    if "phrase" in entry and "expected" not in entry:
        wanted = "said" if entry.get("kind", "contains") == "contains" else "not said"
        heard = entry.get("text")
        actual = f"heard in turn {entry.get('turn')}: {_show(heard)}" if heard else "not heard"
        return FieldMiss(f"phrase {json.dumps(_show(where), ensure_ascii=False)}", wanted, actual)
    operator = entry.get("operator")
    return FieldMiss(where, _show(entry.get("expected")), _show(entry.get("actual")), operator)


def failing_fields(evidence: dict[str, Any] | None) -> list[FieldMiss]:
    """Every entry with `passed: false` under the evidence's `…Results` lists, in order."""
    misses: list[FieldMiss] = []
    for key, entries in (evidence or {}).items():
        if key.endswith(("Results", "_results")) and isinstance(entries, list):
            misses.extend(_miss(e) for e in entries if isinstance(e, dict) and e.get("passed") is False)
    return misses


def gate_text(gated_by: Mapping[str, Any] | None) -> str | None:
    """Why a task scored 0 though its criteria scored more: the required criterion that did not
    pass (numbered from 1, as tables and task files count) and the score it would have had."""
    if not gated_by:
        return None
    position = gated_by.get("position")
    number = f"#{position + 1} " if isinstance(position, int) else ""
    ungated = gated_by.get("ungated_score")
    would = (
        f"; without the gate it would have scored {round(float(ungated), 4):g}" if ungated is not None else ""
    )
    label = json.dumps(str(gated_by.get("label", "")), ensure_ascii=False)
    return f"gated: required criterion {number}{label} did not pass, so the task scores 0{would}"


def miss_text(miss: FieldMiss) -> Text:
    """`path: expected X, got Y` with the expected value green and the actual red."""
    how = f" ({miss.operator})" if miss.operator else ""
    return Text.from_markup(
        f"{escape(miss.where)}{escape(how)}: expected [green]{escape(miss.expected)}[/], "
        f"got [red]{escape(miss.actual)}[/]"
    )
