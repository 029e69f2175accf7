"""Human overrides of criterion runs: who, when and why, kept across `rescore`.

An override replaces a criterion run's `status`/`passed`/`score` with a person's verdict and keeps
what the check judged beside it (`override.judged`), so the record shows both. `rescore` writes new
criterion runs; an override moves onto the new run when the criterion and what it judged (status,
verdict, score and a digest of the evidence) are unchanged, and is carried as `stale` — shown, not
applied — when they changed: never silently dropped.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from assay.core.scoring import ScoredCriterion, TaskScore, as_fraction, score_task
from assay.service.runs.lifecycle import rescore_run, store_score
from assay.service.runs.repository import current_criterion_runs, get_criterion_run
from assay.store import Caller, Conflict, iso, utcnow
from assay.store.models import CriterionRun, TaskRun

__all__ = ["OverrideCreate", "carry_overrides", "override_criterion_run", "score_rows"]


class OverrideCreate(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", use_attribute_docstrings=True)

    passed: bool
    """The person's verdict."""
    score: Annotated[float, Field(ge=0, le=1)] | None = None
    """0..1; defaults to 1 when `passed`, else 0."""
    reason: Annotated[str, Field(min_length=1, max_length=2000)]
    """Why the check's verdict was wrong: kept with the record."""


def _digest(evidence: Any) -> str:
    text = json.dumps(evidence, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _judged(row: CriterionRun) -> dict[str, Any]:
    return {
        "status": row.status,
        "passed": row.passed,
        "score": row.score,
        "evidence_sha256": _digest(row.evidence),
    }


def _apply(row: CriterionRun, override: dict[str, Any]) -> dict[str, Any]:
    """The column values that put `override` in force on `row`."""
    return {"status": "ok", "passed": override["passed"], "score": override["score"], "override": override}


def score_rows(task_run: TaskRun, rows: list[CriterionRun]) -> TaskScore:
    """The task score from recorded criterion runs (overrides included), as `verify_task` scores."""
    criteria = task_run.snapshot["criteria"]
    scored = []
    for row in rows:
        frozen = criteria[row.position] if row.position < len(criteria) else {}
        try:
            weight = as_fraction(row.weight)
        except (TypeError, ValueError, ArithmeticError):
            weight = Fraction(1)
        scored.append(
            ScoredCriterion(
                Fraction(row.score),
                weight if weight > 0 else Fraction(1),
                row.axis,
                row.status == "error",
                required=frozen.get("required") is True,
                passed=row.passed,
                label=row.label,
            )
        )
    return score_task(scored)


def override_criterion_run(
    session: Session, caller: Caller, criterion_run_id: str, body: OverrideCreate
) -> CriterionRun:
    """Record a person's verdict on a current criterion run, then rescore its task and benchmark run."""
    found = get_criterion_run(session, caller, criterion_run_id)
    locking = (
        select(TaskRun)
        .where(TaskRun.id == found.task_run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    task_run = session.scalars(locking).one()  # criterion runs cascade with their task run
    session.refresh(found)
    if found.superseded:
        raise Conflict(f"criterion run {found.id} was superseded by a rescore; override the current one")
    previous = found.override or {}
    score = body.score if body.score is not None else (1.0 if body.passed else 0.0)
    override = {
        "passed": body.passed,
        "score": str(as_fraction(score)),
        "reason": body.reason,
        "by": caller.key_id,
        "at": iso(utcnow()),
        "stale": False,
        "judged": previous.get("judged") or _judged(found),
        "history": [*previous.get("history", []), *([_without_history(previous)] if previous else [])],
    }
    for key, value in _apply(found, override).items():
        setattr(found, key, value)
    session.flush()
    store_score(task_run, score_rows(task_run, current_criterion_runs(session, task_run.id)))
    rescore_run(session, task_run.benchmark_run_id, utcnow())
    return found


def _without_history(override: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in override.items() if key != "history"}


def carry_overrides(session: Session, old: list[CriterionRun], new: list[CriterionRun]) -> None:
    """Move each override of `old` onto the matching run of `new` (same position and criterion):
    in force when what the check judged is unchanged, else kept as `stale` and not applied."""
    by_position = {row.position: row for row in new}
    for previous in old:
        if not previous.override:
            continue
        target = by_position.get(previous.position)
        if target is None or target.criterion_id != previous.criterion_id:
            continue
        override = dict(previous.override)
        unchanged = not override.get("stale") and override.get("judged") == _judged(target)
        if unchanged:
            values = _apply(target, override)
        else:
            override["stale"] = True
            override.setdefault("stale_reason", "what the check judged changed since the override")
            values = {"override": override}
        session.execute(update(CriterionRun).where(CriterionRun.id == target.id).values(**values))
        for key, value in values.items():
            setattr(target, key, value)
