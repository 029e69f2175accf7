"""Asking the LLM judge from a check: the fixed prompts, and strict reading of the answers.

The prompts are files in `checks/prompts/` named `<name>.v<version>.txt`: a system part, a line
`---`, and a user part with `{placeholder}`s. A changed prompt is a new file with a new version,
so a recorded verdict always names the exact words it answered (`prompt_version`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from assay.core.judging import Judge, JudgeAnswer, JudgeQuestion

__all__ = ["JudgeGarbage", "Prompt", "ask_judge", "load_prompt", "parse_json_object"]

PROMPTS = Path(__file__).parent / "prompts"
T = TypeVar("T")


class JudgeGarbage(ValueError):
    """The judge answered, but not in the shape its prompt asks for."""


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    version: int
    system: str
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}/{self.version}"

    def question(self, **values: str) -> JudgeQuestion:
        """The user part with each `{name}` replaced (plain replacement: the JSON braces stay)."""
        user = self.user
        for name, value in values.items():
            user = user.replace("{" + name + "}", value)
        return JudgeQuestion(self.id, self.system, user)


@cache
def load_prompt(name: str, version: int) -> Prompt:
    text = (PROMPTS / f"{name.replace('-', '_')}.v{version}.txt").read_text(encoding="utf-8")
    system, _, user = text.partition("\n---\n")
    return Prompt(name, version, system.strip(), user.strip())


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_json_object(raw: str) -> dict[str, Any]:
    """The one JSON object the prompts ask for; a fenced block is tolerated, prose is not."""
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except ValueError:
        raise JudgeGarbage(f"the judge's answer is not a JSON object: {_clip(raw)!r}") from None
    if not isinstance(value, dict):
        raise JudgeGarbage(f"the judge's answer is not a JSON object: {_clip(raw)!r}")
    return value


def ask_judge(
    judge: Judge, question: JudgeQuestion, read: Callable[[dict[str, Any]], T]
) -> tuple[T, JudgeAnswer]:
    """Ask, then read the answer with `read` (which raises `JudgeGarbage` on a bad shape).

    `JudgeUnavailable` and `JudgeGarbage` propagate: the caller turns them into `error`.
    """
    answer = judge.ask(question)
    return read(parse_json_object(answer.raw)), answer


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
