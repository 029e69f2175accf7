"""The catalog's verbs: create, patch, delete, with the reference rules of docs/api.md.

PATCH merges top-level fields; nested objects (`assertion`, `data`, `settings`) are replaced
whole; `null` clears a nullable field and is a 422 on a required one. Deleting a row that another
row still names by id is a 409; owned children (a task's criteria, a dataset's entities) go with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from assay.checks.vocabulary import VocabularyInvalid, parse_entries
from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid
from assay.service.catalog import repository as repo
from assay.service.catalog.datasets import check_dataset
from assay.service.catalog.schemas import (
    BenchmarkCreate,
    CriterionCreate,
    DatasetCreate,
    EntityCreate,
    EnvironmentCreate,
    SolverCreate,
    TaskCreate,
    TaskReference,
    entity_reference,
)
from assay.service.runs.purge import delete_runs, is_self_test
from assay.store import Caller, Conflict, Invalid, NotFound, new_id, owned, utcnow, where_given
from assay.store.json_values import JsonText, content_hash, json_bytes_and_hash
from assay.store.models import (
    ApiKey,
    Base,
    Benchmark,
    BenchmarkRun,
    Criterion,
    Dataset,
    DatasetEntity,
    Environment,
    Solver,
    Task,
    TaskEntity,
)
from assay.store.tokens import MintedKey, mint_key

__all__ = [
    "NewDataset",
    "apply_patch",
    "create_benchmark",
    "create_criterion",
    "create_dataset",
    "create_entity",
    "create_environment",
    "create_key",
    "create_solver",
    "create_solver_key",
    "create_task",
    "criteria_listed",
    "criteria_of",
    "dataset_entities_listed",
    "delete_benchmark",
    "delete_criterion",
    "delete_dataset",
    "delete_environment",
    "delete_key",
    "delete_solver",
    "delete_solver_key",
    "delete_task",
    "entities_of",
    "get_row",
    "keys_listed",
    "link_task_entity",
    "patch_benchmark",
    "patch_criterion",
    "patch_dataset",
    "patch_environment",
    "patch_solver",
    "patch_task",
    "prepare_dataset",
    "rows_listed",
    "task_entities_listed",
    "tasks_listed",
    "unlink_task_entity",
    "validate_assertion",
]

Row = TypeVar("Row", bound=Base)
_REQUIRED = {
    "name",
    "label",
    "assertion",
    "weight",
    "tags",
    "dataset_ids",
    "settings",
    "data",
    "required",
    "idle_ok",
}


def apply_patch(row: Any, body: BaseModel) -> dict[str, Any]:
    """Copy the fields the client sent onto `row`; return them (for follow-up checks)."""
    changes = {key: getattr(body, key) for key in body.model_fields_set}
    nulls = {key: ["may not be null"] for key, value in changes.items() if value is None and key in _REQUIRED}
    if nulls:
        raise Invalid(nulls)
    for key, value in changes.items():
        setattr(row, key, value)
    if changes:
        row.updated_at = utcnow()
    return changes


def _insert(session: Session, caller: Caller, model: type[Row], id_prefix: str, **columns: Any) -> Row:
    """A new row of the caller's org with a fresh id and both time stamps, flushed (so it reads back)."""
    now = utcnow()
    row = model(id=new_id(id_prefix), org_id=caller.org_id, created_at=now, updated_at=now, **columns)
    session.add(row)
    session.flush()
    return row


def _require_ids(session: Session, model: type[Any], caller: Caller, ids: list[str] | None) -> None:
    missing = repo.missing_ids(session, model, caller, list(ids or []))
    if missing:
        raise NotFound.of(repo.NOUNS[model], missing[0])


def validate_assertion(assertion: Any) -> None:
    """`assertion` must parse (docs/assertions.md); errors come back keyed `assertion.<dotted path>`."""
    try:
        parse_assertion(assertion)
    except AssertionInvalid as exc:
        raise Invalid(
            {("assertion." + key) if key else "assertion": msgs for key, msgs in exc.errors.items()}
        ) from None


def _input_entity(session: Session, caller: Caller, value: dict[str, Any] | None) -> None:
    reference = entity_reference(value)
    if reference is not None:
        _require_ids(session, DatasetEntity, caller, [reference])


# -- datasets -----------------------------------------------------------------------------------


def _entity(dataset: Dataset, body: EntityCreate) -> DatasetEntity:
    return DatasetEntity(
        id=new_id("ent_"),
        org_id=dataset.org_id,
        dataset_id=dataset.id,
        kind=body.kind,
        key=body.key,
        data=body.data,
        created_at=utcnow(),
    )


@dataclass(frozen=True, slots=True)
class NewDataset:
    """A dataset to create, checked, hashed and rendered once (`prepare_dataset`)."""

    body: DatasetCreate
    text: bytes
    """`body.data` as it is stored and echoed (`json_bytes`)."""
    content_hash: str


def prepare_dataset(body: DatasetCreate) -> NewDataset:
    """The work on a new dataset's `data` that needs no database: its checks, its hash and its one
    rendering, reused for the row and the 201 (the 1,024-patient upload rendered each
    bundle again for the JSON column's bind and again for the echo)."""
    check_dataset(body.type, body.data)
    return NewDataset(body, *json_bytes_and_hash(body.data))


def create_dataset(session: Session, caller: Caller, new: NewDataset) -> tuple[Dataset, list[DatasetEntity]]:
    """Store a prepared dataset; its row's `data` is `new.text` as it is (a `JsonText`)."""
    body = new.body
    dataset = _insert(
        session, caller, Dataset, "ds_",
        name=body.name, type=body.type, data=JsonText(new.text.decode()), content_hash=new.content_hash,
    )  # fmt: skip
    entities = [_entity(dataset, entity) for entity in body.entities]
    session.add_all(entities)
    session.flush()
    return dataset, entities


def patch_dataset(session: Session, caller: Caller, dataset_id: str, body: BaseModel) -> Dataset:
    dataset = repo.get(session, Dataset, caller, dataset_id)
    changes = apply_patch(dataset, body)
    if "data" in changes:
        check_dataset(dataset.type, dataset.data)
        dataset.content_hash = content_hash(dataset.data)
    return dataset


def create_entity(session: Session, caller: Caller, dataset_id: str, body: EntityCreate) -> DatasetEntity:
    entity = _entity(repo.get(session, Dataset, caller, dataset_id), body)
    session.add(entity)
    session.flush()
    return entity


def delete_dataset(session: Session, caller: Caller, dataset_id: str) -> None:
    dataset = repo.get(session, Dataset, caller, dataset_id)
    users = [env.id for env in session.scalars(owned(Environment, caller)) if dataset.id in env.dataset_ids]
    users += [task.id for task in session.scalars(owned(Task, caller)) if dataset.id in task.dataset_ids]
    if users:
        raise Conflict(f"dataset {dataset.id} is still used by {', '.join(users)}", {"referenced_by": users})
    entity_ids = {entity.id for entity in repo.entities_of(session, caller, dataset.id)}
    if entity_ids:
        criteria = session.scalars(owned(Criterion, caller).where(Criterion.input_entity_id.in_(entity_ids)))
        users = [criterion.id for criterion in criteria]
        if users:
            raise Conflict(
                f"entities of dataset {dataset.id} are used by {', '.join(users)}", {"referenced_by": users}
            )
    session.delete(dataset)


# -- environments, benchmarks -------------------------------------------------------------------


def create_environment(session: Session, caller: Caller, body: EnvironmentCreate) -> Environment:
    _require_ids(session, Dataset, caller, body.dataset_ids)
    return _insert(session, caller, Environment, "env_", **dict(body))


def patch_environment(session: Session, caller: Caller, environment_id: str, body: BaseModel) -> Environment:
    environment = repo.get(session, Environment, caller, environment_id)
    _require_ids(session, Dataset, caller, apply_patch(environment, body).get("dataset_ids"))
    return environment


def delete_environment(session: Session, caller: Caller, environment_id: str) -> None:
    repo.delete(
        session,
        Environment,
        caller,
        environment_id,
        refused_while={Benchmark.environment_id: "environment {id} is still used by a benchmark"},
    )


def create_benchmark(session: Session, caller: Caller, body: BenchmarkCreate) -> Benchmark:
    if body.environment_id:
        repo.get(session, Environment, caller, body.environment_id)
    _check_vocabulary(body.vocabulary)
    return _insert(session, caller, Benchmark, "bm_", **dict(body))


def patch_benchmark(session: Session, caller: Caller, benchmark_id: str, body: BaseModel) -> Benchmark:
    benchmark = repo.get(session, Benchmark, caller, benchmark_id)
    _check_vocabulary(getattr(body, "vocabulary", None))
    changes = apply_patch(benchmark, body)
    if changes.get("environment_id"):
        repo.get(session, Environment, caller, changes["environment_id"])
    return benchmark


def _check_vocabulary(vocabulary: list[Any] | None) -> None:
    """A benchmark's vocabulary is checked when it is stored, so a run never meets a bad one."""
    if vocabulary:
        try:
            parse_entries(vocabulary)
        except VocabularyInvalid as exc:
            raise Invalid(exc.problems) from None


def delete_benchmark(session: Session, caller: Caller, benchmark_id: str) -> None:
    """A benchmark with runs is kept for their records, unless every run is a self-test (an
    author's check, `assay lint`'s throwaway draft): those go with it, in this transaction."""
    benchmark = repo.get(session, Benchmark, caller, benchmark_id)
    if repo.uses(session, caller, Task.benchmark_id, benchmark.id):
        raise Conflict(f"benchmark {benchmark.id} still has tasks; delete them first")
    runs = session.execute(
        select(BenchmarkRun.id, BenchmarkRun.agent).where(
            BenchmarkRun.org_id == caller.org_id, BenchmarkRun.benchmark_id == benchmark.id
        )
    ).all()
    if any(not is_self_test(agent) for _, agent in runs):
        raise Conflict(f"benchmark {benchmark.id} has runs and is kept for their records")
    delete_runs(session, [run_id for run_id, _ in runs])
    session.delete(benchmark)


# -- tasks, criteria ----------------------------------------------------------------------------


def create_task(session: Session, caller: Caller, body: TaskCreate) -> Task:
    repo.get(session, Benchmark, caller, body.benchmark_id)
    _require_ids(session, Dataset, caller, body.dataset_ids)
    _input_entity(session, caller, body.input_entity)
    return _insert(session, caller, Task, "task_", **{**dict(body), "reference": _reference(body.reference)})


def _reference(reference: TaskReference | None) -> dict[str, Any] | None:
    """A reference solution as stored: plain JSON, `json` bodies under their wire name."""
    return reference.model_dump(by_alias=True, exclude_none=True) if reference else None


def patch_task(session: Session, caller: Caller, task_id: str, body: BaseModel) -> Task:
    task = repo.get(session, Task, caller, task_id)
    changes = apply_patch(task, body)
    if "reference" in changes:
        task.reference = _reference(changes["reference"])
    _require_ids(session, Dataset, caller, changes.get("dataset_ids"))
    _input_entity(session, caller, changes.get("input_entity"))
    return task


def delete_task(session: Session, caller: Caller, task_id: str) -> None:
    """Its criteria go with it; runs keep their frozen snapshot."""
    repo.delete(session, Task, caller, task_id)


def link_task_entity(session: Session, caller: Caller, task_id: str, entity_id: str) -> DatasetEntity:
    task = repo.get(session, Task, caller, task_id)
    entity = repo.get(session, DatasetEntity, caller, entity_id)
    if session.get(TaskEntity, (task.id, entity.id)) is None:
        session.add(
            TaskEntity(task_id=task.id, entity_id=entity.id, org_id=caller.org_id, created_at=utcnow())
        )
        session.flush()
    return entity


def unlink_task_entity(session: Session, caller: Caller, task_id: str, entity_id: str) -> None:
    task = repo.get(session, Task, caller, task_id)
    link = session.get(TaskEntity, (task.id, entity_id))
    if link is None or link.org_id != caller.org_id:
        raise NotFound(f"entity {entity_id} is not attached to task {task.id}")
    session.delete(link)


def create_criterion(session: Session, caller: Caller, body: CriterionCreate) -> Criterion:
    repo.get(session, Task, caller, body.task_id)
    validate_assertion(body.assertion)
    if body.input_entity_id:
        repo.get(session, DatasetEntity, caller, body.input_entity_id)
    return _insert(session, caller, Criterion, "crit_", **dict(body))


def patch_criterion(session: Session, caller: Caller, criterion_id: str, body: BaseModel) -> Criterion:
    criterion = repo.get(session, Criterion, caller, criterion_id)
    if "assertion" in body.model_fields_set and getattr(body, "assertion", None) is not None:
        validate_assertion(body.assertion)  # type: ignore[attr-defined]
    changes = apply_patch(criterion, body)
    if changes.get("input_entity_id"):
        repo.get(session, DatasetEntity, caller, changes["input_entity_id"])
    return criterion


def delete_criterion(session: Session, caller: Caller, criterion_id: str) -> None:
    repo.delete(session, Criterion, caller, criterion_id)


# -- solvers and keys ---------------------------------------------------------------------------


def create_solver(session: Session, caller: Caller, body: SolverCreate) -> Solver:
    return _insert(session, caller, Solver, "slv_", **dict(body))


def patch_solver(session: Session, caller: Caller, solver_id: str, body: BaseModel) -> Solver:
    solver = repo.get(session, Solver, caller, solver_id)
    apply_patch(solver, body)
    return solver


def delete_solver(session: Session, caller: Caller, solver_id: str) -> None:
    refused_while = {BenchmarkRun.solver_id: "solver {id} has benchmark runs and is kept for their records"}
    repo.delete(session, Solver, caller, solver_id, refused_while=refused_while)


def delete_key(session: Session, caller: Caller, key_id: str) -> None:
    """An org key (`vk_`); a Solver key is deleted through its solver."""
    repo.delete(session, ApiKey, caller, key_id, kind="org")


def delete_solver_key(session: Session, caller: Caller, solver_id: str, key_id: str) -> None:
    repo.delete(session, ApiKey, caller, key_id, solver_id=solver_id)


def create_key(session: Session, caller: Caller, name: str | None) -> MintedKey:
    """An org key (`vk_`); its plaintext exists in the returned value only."""
    return mint_key(session, caller.org_id, kind="org", name=name)


def create_solver_key(session: Session, caller: Caller, solver_id: str, name: str | None) -> MintedKey:
    """A Solver key (`vrl_slv_`) of one of the caller's solvers."""
    solver = repo.get(session, Solver, caller, solver_id)
    return mint_key(session, caller.org_id, kind="solver", solver_id=solver.id, name=name)


# -- reads: the rows and scoped queries the handlers show and page through ---------------------


def get_row(session: Session, model: type[Row], caller: Caller, ident: str) -> Row:
    """One of the caller's rows by id; another org's id is a 404."""
    row: Row = repo.get(session, model, caller, ident)
    return row


def entities_of(session: Session, caller: Caller, dataset_id: str) -> list[DatasetEntity]:
    return repo.entities_of(session, caller, dataset_id)


def criteria_of(session: Session, caller: Caller, task_id: str) -> list[Criterion]:
    return repo.criteria_of(session, caller, task_id)


def rows_listed(model: type[Row], caller: Caller) -> Select[Row]:
    """The caller's rows of one collection, for a page of `GET /<collection>`."""
    return owned(model, caller)


def dataset_entities_listed(session: Session, caller: Caller, dataset_id: str) -> Select[DatasetEntity]:
    """The entities of one of the caller's datasets (404 for an unknown dataset, not an empty page)."""
    repo.get(session, Dataset, caller, dataset_id)
    return owned(DatasetEntity, caller).where(DatasetEntity.dataset_id == dataset_id)


def task_entities_listed(session: Session, caller: Caller, task_id: str) -> Select[DatasetEntity]:
    """The dataset entities linked to one of the caller's tasks (404 for an unknown task)."""
    repo.get(session, Task, caller, task_id)
    linked = (
        owned(TaskEntity, caller).where(TaskEntity.task_id == task_id).with_only_columns(TaskEntity.entity_id)
    )
    return owned(DatasetEntity, caller).where(DatasetEntity.id.in_(linked))


def tasks_listed(caller: Caller, benchmark_id: str | None) -> Select[Task]:
    return where_given(owned(Task, caller), Task.benchmark_id, benchmark_id)


def criteria_listed(caller: Caller, task_id: str | None) -> Select[Criterion]:
    return where_given(owned(Criterion, caller), Criterion.task_id, task_id)


def keys_listed(caller: Caller) -> Select[ApiKey]:
    """The org's own keys; Solver keys are listed with nothing (they are shown once, at creation)."""
    return owned(ApiKey, caller).where(ApiKey.kind == "org")
