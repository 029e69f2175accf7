"""Judging a task run's frozen criteria on its captured state and recording the criterion runs:
the steps `complete` and `rescore` share (`actions`)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from assay import sandboxes
from assay.core.judging import Judge, ReplayJudge, judge_records
from assay.service.catalog.schemas import entity_reference
from assay.service.grading import Grading
from assay.store import new_id, utcnow
from assay.store.models import CriterionRun, TaskRun
from assay.verify import CriterionSpec, TaskVerification, verify_task

__all__ = ["input_entity_of", "jsonable", "record_criterion_runs", "replaying_judge", "verify_capture"]


def verify_capture(
    session: Session,
    task_run: TaskRun,
    pointer: dict[str, Any],
    grading: Grading,
    judge: Judge | None,
) -> TaskVerification:
    """Judge the frozen criteria on the captured state: the same `verify_task` as `assay verify`."""
    criteria = task_run.snapshot["criteria"]
    specs = [CriterionSpec.from_json(criterion, i) for i, criterion in enumerate(criteria)]
    state = sandboxes.state_of(pointer, session)
    return verify_task(
        specs,
        state,
        input_entity=state.input_entity(),
        semantic=grading.semantic,
        judge=judge,
        vocabulary=task_run.snapshot.get("vocabulary"),
    )


def replaying_judge(rows: list[CriterionRun], live: Judge | None) -> Judge | None:
    """The judge for a rescore: recorded verdicts first, the live judge only for new questions."""
    records: dict[str, Any] = {}
    for row in rows:
        records.update(judge_records(row.evidence))
    if not records:
        return live
    return ReplayJudge(records, live)


def record_criterion_runs(
    session: Session, task_run: TaskRun, verification: TaskVerification
) -> list[CriterionRun]:
    """One set of criterion runs, in one bulk INSERT (no unit-of-work bookkeeping per row)."""
    now, criteria = utcnow(), task_run.snapshot["criteria"]
    values = [
        dict(
            id=new_id("crun_"),
            org_id=task_run.org_id,
            task_run_id=task_run.id,
            criterion_id=run.spec.criterion_id,
            position=i,
            label=run.spec.label,
            axis=run.spec.axis,
            weight=criteria[i].get("weight", 1),
            status=run.result.status,
            passed=run.result.passed,
            score=str(run.result.score),
            details=run.result.details.replace("\x00", "\\x00"),  # PostgreSQL text holds no NUL
            evidence=jsonable(run.result.evidence),
            override=None,
            superseded=False,
            created_at=now,
            started_at=run.started_at,
            completed_at=run.completed_at,
        )
        for i, run in enumerate(verification.runs)
    ]
    if values:
        session.execute(insert(CriterionRun), values)
    return [CriterionRun(**row) for row in values]


def jsonable(evidence: Any) -> Any:
    """Evidence as plain JSON: a check that put a date or a Fraction in it must not fail the write."""
    try:
        return json.loads(json.dumps(evidence, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return {"unserializable": repr(evidence)[:2000]}


def input_entity_of(task_run: TaskRun) -> dict[str, Any] | None:
    entity = task_run.snapshot["task"].get("input_entity")
    if isinstance(entity, dict) and entity_reference(entity) is None:
        return entity
    return None
