"""`verify_task`: parse → dispatch → time limit → score. Pure: state in, results out.

`complete`, `rescore` and `assay verify` all call this one function, so the service and the
command line can never disagree about a score (as Inspect re-scores its logs).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from assay.checks import CHECKS, PREPARE, CheckContext
from assay.checks.vocabulary import Lexicon, VocabularyInvalid, lexicon_for
from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid
from assay.core.judging import Judge
from assay.core.results import CriterionResult
from assay.core.scoring import ScoredCriterion, TaskScore, as_fraction, json_number, score_task
from assay.core.state import SandboxState

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "CriterionRunResult",
    "CriterionSpec",
    "TaskVerification",
    "verify_criterion",
    "verify_task",
]

DEFAULT_TIME_LIMIT = 10.0


@dataclass(frozen=True, slots=True)
class CriterionSpec:
    """One criterion as frozen in a task run's snapshot or read from a task file."""

    assertion: Any
    label: str = ""
    weight: Fraction = Fraction(1)
    axis: str | None = None
    input_entity_id: str | None = None
    criterion_id: str | None = None
    required: bool = False
    """A gate: the task scores 0 unless this criterion passes (docs/scoring.md)."""
    idle_ok: bool = False
    """The author's word that passing with no agent action is right (a "never said X" rule)."""
    problem: str | None = None
    """Why the criterion as given cannot be judged (a non-string axis or input_entity_id)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any], position: int = 0) -> CriterionSpec:
        """From a criterion object (API, task file); a bad weight becomes 1 and is reported later,
        like an axis or input_entity_id that is not a string (dropped, so scoring cannot trip on it)."""
        weight = data.get("weight", 1)
        try:
            exact = as_fraction(weight) if not isinstance(weight, bool) else Fraction(0)
        except (TypeError, ValueError, ArithmeticError):
            exact = Fraction(0)
        axis, entity_id = data.get("axis") or None, data.get("input_entity_id")
        problems = [
            f"{key} must be a string"
            for key, value in (("axis", axis), ("input_entity_id", entity_id))
            if value is not None and not isinstance(value, str)
        ]
        flags = {key: data.get(key, False) for key in ("required", "idle_ok")}
        problems += [
            f"{key} must be true or false" for key, value in flags.items() if not isinstance(value, bool)
        ]
        return cls(
            assertion=data.get("assertion"),
            label=str(data.get("label") or f"criterion {position + 1}"),
            weight=exact if exact > 0 else Fraction(-1),
            axis=axis if isinstance(axis, str) else None,
            input_entity_id=entity_id if isinstance(entity_id, str) else None,
            criterion_id=data.get("id"),
            required=flags["required"] is True,
            idle_ok=flags["idle_ok"] is True,
            problem="; ".join(problems) or None,
        )


@dataclass(frozen=True, slots=True)
class CriterionRunResult:
    spec: CriterionSpec
    result: CriterionResult
    started_at: datetime
    completed_at: datetime

    @property
    def weight(self) -> Fraction:
        return self.spec.weight if self.spec.weight > 0 else Fraction(1)

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.spec.label,
            "axis": self.spec.axis,
            "weight": json_number(self.weight),
            "status": self.result.status,
            "passed": self.result.passed,
            "score": float(self.result.score),
            "details": self.result.details,
            "evidence": self.result.evidence,
        }


@dataclass(frozen=True, slots=True)
class TaskVerification:
    runs: list[CriterionRunResult]
    score: TaskScore = field(repr=False)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "score": float(self.score.score),
            "verdict": self.score.verdict,
            "axes": self.score.axes_json(),
            "criterion_runs": [run.as_json() for run in self.runs],
        }
        if self.score.gated_by is not None:
            body["gated_by"] = self.score.gated_by.as_json()
        return body


class _Runner:
    """Runs checks on one worker thread so a runaway check can be abandoned at its time limit.

    Python cannot kill a thread: a check past its limit keeps running in the background while its
    criterion is recorded as an error, and the next check gets a fresh worker. Each calling thread
    has its own runner (`_runner()`), so no two callers ever share a pool.
    """

    def __init__(self) -> None:
        self._pool = self._new_pool()

    @staticmethod
    def _new_pool() -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="assay-check")

    def run(self, fn: Any, *args: Any, time_limit: float) -> CriterionResult:
        future = self._pool.submit(fn, *args)
        try:
            return future.result(timeout=time_limit)
        except concurrent.futures.TimeoutError:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            return CriterionResult.error(f"check exceeded its time limit of {time_limit:g} s")


_RUNNERS = threading.local()


def _runner() -> _Runner:
    runner = getattr(_RUNNERS, "runner", None)
    if runner is None:
        runner = _RUNNERS.runner = _Runner()
    return runner


def verify_criterion(
    spec: CriterionSpec,
    state: SandboxState,
    *,
    input_entity: Mapping[str, Any] | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    semantic: bool = False,
    judge: Judge | None = None,
    vocabulary: Any = None,
) -> CriterionResult:
    """Judge one criterion; never raises.

    `semantic` turns the semantic voice tier on for every voice criterion (`ASSAY_VOICE_SEMANTIC`);
    `judge` answers tier 4 and natural-language evals (the service and the CLI inject it, so the
    core never talks HTTP); `vocabulary` is the benchmark's own lexicon entries (frozen in the task
    run's snapshot), added to the built-in ones for the voice vocabulary tier.
    """
    if spec.weight <= 0:
        return CriterionResult.unsupported("weight must be a number > 0")
    if spec.problem:
        return CriterionResult.unsupported(spec.problem)
    try:
        assertion = parse_assertion(spec.assertion, at_verify=True)
    except AssertionInvalid as exc:
        return CriterionResult.unsupported(_reason(exc))
    check = CHECKS.get(assertion.assert_)
    if check is None:
        return CriterionResult.unsupported(f"no check registered for {assertion.assert_}")
    if spec.input_entity_id:
        entity = state.entity(spec.input_entity_id)
        if entity is not None:
            input_entity = entity
    lexicon, problem = _lexicon(vocabulary)
    context = CheckContext(
        input_entity=input_entity,
        semantic=semantic,
        judge=judge,
        lexicon=lexicon,
        vocabulary_problem=problem,
    )
    prepare = PREPARE.get(assertion.assert_)
    if prepare is not None:
        try:
            prepare(assertion, context)
        except Exception as exc:  # a model that cannot load is the criterion's error, as data
            return CriterionResult.error(f"check set-up failed: {type(exc).__name__}: {exc}")
    if judge is not None:
        time_limit += judge.timeout * _judge_questions(assertion)
    try:
        return _runner().run(check, assertion, state, context, time_limit=time_limit)
    except Exception as exc:  # the contract: a check never raises; if one does, it is data
        # `future.result()` re-raises here what the check raised on the worker.
        return CriterionResult.error(f"check failed: {type(exc).__name__}: {exc}")


def _lexicon(vocabulary: Any) -> tuple[Lexicon | None, str | None]:
    """The built-in lexicon plus the benchmark's entries, or why those entries cannot be used."""
    if not vocabulary:
        return None, None
    try:
        return lexicon_for(vocabulary), None
    except VocabularyInvalid as exc:
        return None, str(exc)


def verify_task(
    criteria: Sequence[CriterionSpec],
    state: SandboxState,
    *,
    input_entity: Mapping[str, Any] | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    semantic: bool = False,
    judge: Judge | None = None,
    vocabulary: Any = None,
) -> TaskVerification:
    """Judge every criterion in order and score the task (docs/assertions.md, docs/scoring.md)."""
    if input_entity is None:
        input_entity = state.input_entity()
    runs: list[CriterionRunResult] = []
    for spec in criteria:
        started = datetime.now(UTC)
        result = verify_criterion(
            spec,
            state,
            input_entity=input_entity,
            time_limit=time_limit,
            semantic=semantic,
            judge=judge,
            vocabulary=vocabulary,
        )
        runs.append(CriterionRunResult(spec, result, started, datetime.now(UTC)))
    scored = [
        ScoredCriterion(
            run.result.score,
            run.weight,
            run.spec.axis,
            run.result.status == "error",
            required=run.spec.required,
            passed=run.result.passed,
            label=run.spec.label,
        )
        for run in runs
    ]
    return TaskVerification(runs, score_task(scored))


def _judge_questions(assertion: Any) -> int:
    """How many judge questions a criterion may ask: one per `contains` phrase, one per eval."""
    if assertion.assert_ == "natural-language":
        return 1
    return len(getattr(assertion, "contains", ()))


def _reason(exc: AssertionInvalid) -> str:
    parts = []
    for key, messages in exc.errors.items():
        for message in messages:
            parts.append(f"{message} (at {key})" if key else message)
    return "; ".join(parts)
