"""The LLM-judge seam: what a check asks, what it gets back, and how verdicts are replayed.

Tier 4 of `voice-transcript` (docs/assertions.md) and `natural-language` evals (docs/assertions.md) ask a
judge. The core never talks HTTP (import-linter forbids it), so the judge is a protocol the caller passes to
`verify_task`; the OpenAI-compatible client lives above, in `assay.judge`, wired by the service
and the command line.

A judge's answer is data like any other evidence: each one is recorded beside the verdict it
decided (`JudgeAnswer.record`), keyed by the hash of the exact question. `ReplayJudge` answers
from those records, so `rescore` reproduces a judged score without asking again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from assay.core.errors import CoreError

__all__ = ["Judge", "JudgeAnswer", "JudgeQuestion", "JudgeUnavailable", "ReplayJudge", "judge_records"]


@dataclass(frozen=True, slots=True)
class JudgeQuestion:
    """One fixed prompt, rendered: the same question always has the same `key`."""

    prompt_version: str
    """`<prompt name>/<version>`, e.g. `voice-phrase/1` (the prompt files in `checks/prompts`)."""
    system: str
    user: str

    @property
    def key(self) -> str:
        text = "\x00".join((self.prompt_version, self.system, self.user))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    """What the judge said, as it said it, and what it cost."""

    raw: str
    """The message content, unparsed: the check parses it (garbage makes the criterion `error`)."""
    model: str
    latency_ms: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    replayed: bool = False
    """True when the answer came from a stored record instead of the judge."""

    def record(self, question: JudgeQuestion, verdict: Any) -> dict[str, Any]:
        """The evidence entry that lets `ReplayJudge` give this answer again."""
        return {
            "model": self.model,
            "prompt_version": question.prompt_version,
            "question_sha256": question.key,
            "raw": self.raw,
            "verdict": verdict,
            "latency_ms": round(self.latency_ms, 1),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "replayed": self.replayed,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> JudgeAnswer:
        return cls(
            raw=str(record.get("raw", "")),
            model=str(record.get("model", "")),
            latency_ms=float(record.get("latency_ms") or 0.0),
            prompt_tokens=record.get("prompt_tokens"),
            completion_tokens=record.get("completion_tokens"),
            replayed=True,
        )


class JudgeUnavailable(CoreError):
    """The judge could not answer: timeout, refused connection, an HTTP error, no usable reply.

    A check turns it into `status: "error"` (a grader that cannot decide says so)."""


class Judge(Protocol):
    """Anything that answers a `JudgeQuestion`; raises `JudgeUnavailable` when it cannot."""

    @property
    def timeout(self) -> float:
        """Longest one `ask` may take, in seconds: a criterion's time limit grows by this much
        per question it may ask, so a slow judge is the judge's error, not the check's."""
        ...

    def ask(self, question: JudgeQuestion) -> JudgeAnswer: ...


@dataclass(frozen=True, slots=True)
class ReplayJudge:
    """Answers from recorded verdicts; a question never asked before goes to `live`, if any."""

    records: Mapping[str, Mapping[str, Any]]
    """`question_sha256` → the evidence record of a previous answer."""
    live: Judge | None = None

    @property
    def timeout(self) -> float:
        return self.live.timeout if self.live is not None else 0.0

    def ask(self, question: JudgeQuestion) -> JudgeAnswer:
        record = self.records.get(question.key)
        if record is not None:
            return JudgeAnswer.from_record(record)
        if self.live is None:
            raise JudgeUnavailable(
                f"no recorded {question.prompt_version} verdict for this question and no judge is "
                "configured to ask (set ASSAY_JUDGE_URL)"
            )
        return self.live.ask(question)


def judge_records(evidence: Any) -> dict[str, Mapping[str, Any]]:
    """Every judge record inside one criterion run's evidence, by question hash."""
    return {record["question_sha256"]: record for record in _walk(evidence)}


def _walk(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        if isinstance(value.get("question_sha256"), str) and "raw" in value:
            yield value
            return
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)
