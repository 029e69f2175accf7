"""Resources that mirror the API (docs/api.md, docs/sdk.md): one class per collection, shared by `Assay` and
`AsyncAssay`.

A method builds a `Call` and hands it to the client's engine: `Assay`'s runs it and returns the
value, `AsyncAssay`'s returns an awaitable of the same value, and `list` is an iterator (async
iterator) over every page. The annotations show the synchronous types; with `AsyncAssay`, await each
call (`await client.criteria.get(id)`) and `async for` over lists.

`update(id, **changes)` sends a PATCH of exactly the keys given: top-level fields merge, nested ones
(`assertion`, `data`) are replaced whole, and `None` clears a nullable field (docs/api.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import httpx

from assay.client._http import Call
from assay.client._models import (
    ApiKey,
    Benchmark,
    BenchmarkRun,
    BenchmarkRunCreated,
    BenchmarkRunSummary,
    BenchmarkVersion,
    Completion,
    Criterion,
    CriterionRun,
    Dataset,
    DatasetEntity,
    Environment,
    Model,
    Playground,
    SandboxEvent,
    Solver,
    StartedTaskRun,
    Task,
    TaskRun,
    TaskView,
)

__all__ = [
    "ApiKeys",
    "BenchmarkRuns",
    "Benchmarks",
    "Criteria",
    "CriterionRuns",
    "Datasets",
    "Environments",
    "Playgrounds",
    "Solvers",
    "TaskRuns",
    "Tasks",
]

T = TypeVar("T")
M = TypeVar("M", bound=Model)


def _reader(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate(response.json())


def _json(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    return body


def _nothing(_response: httpx.Response) -> None:
    return None


def _body(**fields: Any) -> dict[str, Any]:
    """A create body: the keys given, without the optional ones left at None (server defaults)."""
    return {key: value for key, value in fields.items() if value is not None}


class _Resource:
    def __init__(self, engine: Any):
        self._engine = engine
        """A `SyncEngine` or an `AsyncEngine`; typed loosely so one class serves both clients."""

    def _run(self, call: Call[T]) -> T:
        result: T = self._engine.run(call)
        return result

    def _pages(self, path: str, parse: Callable[[Any], T], **filters: Any) -> Iterator[T]:
        pages: Iterator[T] = self._engine.pages(path, filters, parse)
        return pages


class _Collection(_Resource, Generic[M]):
    """get / list / update / delete, alike in every catalog collection."""

    path: ClassVar[str]
    model: type[M]

    def get(self, id: str) -> M:
        return self._run(Call("GET", f"{self.path}/{id}", _reader(self.model)))

    def _list(self, **filters: Any) -> Iterator[M]:
        return self._pages(self.path, self.model.model_validate, **filters)

    def update(self, id: str, **changes: Any) -> M:
        return self._run(Call("PATCH", f"{self.path}/{id}", _reader(self.model), json=changes))

    def delete(self, id: str) -> None:
        return self._run(Call("DELETE", f"{self.path}/{id}", _nothing))

    def _create(self, body: dict[str, Any]) -> M:
        return self._run(Call("POST", self.path, _reader(self.model), json=body))


class Criteria(_Collection[Criterion]):
    path, model = "/criteria", Criterion

    def create(
        self,
        *,
        task_id: str,
        label: str,
        assertion: dict[str, Any],
        weight: float | None = None,
        axis: str | None = None,
        input_entity_id: str | None = None,
        required: bool | None = None,
        idle_ok: bool | None = None,
    ) -> Criterion:
        """Create a criterion; `assertion` is one of the typed shapes of docs/assertions.md (422 names the bad
        key). `required` makes it a gate, `idle_ok` says an idle agent may pass it (docs/scoring.md)."""
        return self._create(
            _body(
                task_id=task_id,
                label=label,
                assertion=assertion,
                weight=weight,
                axis=axis,
                input_entity_id=input_entity_id,
                required=required,
                idle_ok=idle_ok,
            )
        )

    def list(self, *, task_id: str | None = None) -> Iterator[Criterion]:
        return self._list(task_id=task_id)


class Benchmarks(_Collection[Benchmark]):
    path, model = "/benchmarks", Benchmark

    def create(
        self,
        *,
        name: str,
        description: str | None = None,
        environment_id: str | None = None,
        timeout: int | None = None,
        concurrency: int | None = None,
        vocabulary: Sequence[dict[str, Any]] | None = None,
    ) -> Benchmark:
        """`vocabulary`: lexicon entries `{terms, source, id?, ambiguous?}` for the voice
        vocabulary tier, added to the built-in ones (422 names a bad entry's key)."""
        return self._create(
            _body(
                name=name,
                description=description,
                environment_id=environment_id,
                timeout=timeout,
                concurrency=concurrency,
                vocabulary=vocabulary,
            )
        )

    def list(self) -> Iterator[Benchmark]:
        return self._list()

    def publish(self, id: str, *, slug: str | None = None, force: bool = False) -> BenchmarkVersion:
        """Freeze the draft as `slug@version` (version +1 per publish). The server first self-tests
        every task (docs/scoring.md) and refuses with `ConflictError` (each task's problems in
        `details["self_tests"]`) unless `force`."""
        body = _body(slug=slug, force=force or None)
        call = Call(
            "POST", f"{self.path}/{id}/publish", _reader(BenchmarkVersion), json=body, timeout=PUBLISH_TIMEOUT
        )
        return self._run(call)


PUBLISH_TIMEOUT = 600.0
"""Seconds a publish may take: the server self-tests every task (reference and idle agent) in the
request, so a benchmark of tens of tasks on a busy server takes longer than the default 60 s."""


class Tasks(_Collection[Task]):
    path, model = "/tasks", Task

    def create(
        self,
        *,
        benchmark_id: str,
        name: str,
        task_item: Any = None,
        scenario: Sequence[dict[str, Any]] | None = None,
        tags: Sequence[str] | None = None,
        timeout: int | None = None,
        dataset_ids: Sequence[str] | None = None,
        input_entity: dict[str, Any] | None = None,
        reference: dict[str, Any] | None = None,
    ) -> Task:
        """`reference` is a reference solution, `{actions}` or `{snapshot}`, for the self-test (docs/scoring.md)."""
        return self._create(
            _body(
                benchmark_id=benchmark_id,
                name=name,
                task_item=task_item,
                scenario=scenario,
                tags=tags,
                timeout=timeout,
                dataset_ids=dataset_ids,
                input_entity=input_entity,
                reference=reference,
            )
        )

    def list(self, *, benchmark_id: str | None = None) -> Iterator[Task]:
        return self._list(benchmark_id=benchmark_id)

    def self_test(self, id: str) -> dict[str, Any]:
        """Score the task with an idle agent and its reference solution (docs/scoring.md)."""
        return self._run(Call("POST", f"/tasks/{id}/self-test", _json))

    def entities(self, id: str) -> Iterator[DatasetEntity]:
        return self._pages(f"{self.path}/{id}/entities", DatasetEntity.model_validate)

    def link_entity(self, id: str, entity_id: str) -> DatasetEntity:
        call = Call(
            "POST", f"{self.path}/{id}/entities", _reader(DatasetEntity), json={"entity_id": entity_id}
        )
        return self._run(call)

    def unlink_entity(self, id: str, entity_id: str) -> None:
        return self._run(Call("DELETE", f"{self.path}/{id}/entities/{entity_id}", _nothing))


class Datasets(_Collection[Dataset]):
    path, model = "/datasets", Dataset

    def create(
        self, *, name: str, type: str, data: dict[str, Any], entities: Sequence[dict[str, Any]] | None = None
    ) -> Dataset:
        """`type` is fhir, files, portal, hl7, x12 or voice; `data` is shaped by type (docs/api.md)."""
        return self._create(_body(name=name, type=type, data=data, entities=entities))

    def list(self) -> Iterator[Dataset]:
        return self._list()

    def entities(self, id: str) -> Iterator[DatasetEntity]:
        return self._pages(f"{self.path}/{id}/entities", DatasetEntity.model_validate)

    def create_entity(
        self, id: str, *, kind: str, key: str | None = None, data: dict[str, Any] | None = None
    ) -> DatasetEntity:
        body = _body(kind=kind, key=key, data=data)
        return self._run(Call("POST", f"{self.path}/{id}/entities", _reader(DatasetEntity), json=body))


class Environments(_Collection[Environment]):
    path, model = "/environments", Environment

    def create(
        self,
        *,
        name: str,
        description: str | None = None,
        dataset_ids: Sequence[str] | None = None,
        settings: dict[str, Any] | None = None,
    ) -> Environment:
        return self._create(
            _body(name=name, description=description, dataset_ids=dataset_ids, settings=settings)
        )

    def list(self) -> Iterator[Environment]:
        return self._list()


class Solvers(_Collection[Solver]):
    path, model = "/solvers", Solver

    def create(self, *, name: str, description: str | None = None, version: str | None = None) -> Solver:
        return self._create(_body(name=name, description=description, version=version))

    def list(self) -> Iterator[Solver]:
        return self._list()

    def create_key(self, id: str, *, name: str | None = None) -> ApiKey:
        """A Solver key (`vrl_slv_…`); its plaintext `key` is in this answer only."""
        return self._run(Call("POST", f"{self.path}/{id}/api-keys", _reader(ApiKey), json=_body(name=name)))

    def delete_key(self, id: str, key_id: str) -> None:
        return self._run(Call("DELETE", f"{self.path}/{id}/api-keys/{key_id}", _nothing))


class ApiKeys(_Resource):
    def create(self, *, name: str | None = None) -> ApiKey:
        """An org key (`vk_…`); its plaintext `key` is in this answer only."""
        return self._run(Call("POST", "/api-keys", _reader(ApiKey), json=_body(name=name)))

    def list(self) -> Iterator[ApiKey]:
        return self._pages("/api-keys", ApiKey.model_validate)

    def delete(self, id: str) -> None:
        return self._run(Call("DELETE", f"/api-keys/{id}", _nothing))


class BenchmarkRuns(_Resource):
    def create(
        self,
        *,
        benchmark: str | None = None,
        benchmark_id: str | None = None,
        scored: bool | None = None,
        agent: Any = None,
        solver_id: str | None = None,
    ) -> BenchmarkRunCreated:
        """Start a rollout through the public run API: `benchmark` is `slug@version` (or `slug`, the
        latest), `benchmark_id` runs the current draft. Works with an org key or a Solver key; the
        answer holds the run's `bearer_token`, once."""
        body = _body(
            benchmark=benchmark, benchmark_id=benchmark_id, scored=scored, agent=agent, solver_id=solver_id
        )
        return self._run(Call("POST", "/v1/benchmark-runs", _reader(BenchmarkRunCreated), json=body))

    def get(self, id: str) -> BenchmarkRun:
        """The full record with its task runs (org key)."""
        return self._run(Call("GET", f"/benchmark-runs/{id}", _reader(BenchmarkRun)))

    def summary(self, id: str, *, run_token: str | None = None) -> BenchmarkRunSummary:
        """`GET /v1/benchmark-runs/{id}`: what the run's own token (or its solver's key) may read."""
        return self._run(
            Call("GET", f"/v1/benchmark-runs/{id}", _reader(BenchmarkRunSummary), token=run_token)
        )

    def list(self, *, benchmark_id: str | None = None, self_tests: bool = False) -> Iterator[BenchmarkRun]:
        """Newest first; self-test runs (agent `assay self-test`) only with `self_tests=True`."""
        return self._pages(
            "/benchmark-runs",
            BenchmarkRun.model_validate,
            benchmark_id=benchmark_id,
            self_tests="true" if self_tests else None,
        )

    def cancel(self, id: str) -> BenchmarkRun:
        return self._run(Call("POST", f"/benchmark-runs/{id}/cancel", _reader(BenchmarkRun)))

    def compare(self, a: str, b: str) -> dict[str, Any]:
        """A minus B per task, the difference of means with its 95% interval, `exceeds_noise`."""
        return self._run(Call("GET", "/benchmark-runs/compare", _json, params={"a": a, "b": b}))


def _task_view(response: httpx.Response) -> TaskView:
    body = response.json()
    return TaskView.model_validate(body.get("task", body))


class TaskRuns(_Resource):
    def start(self, id: str, *, run_token: str | None = None) -> StartedTaskRun:
        """Provision the playground (idempotent while started); `run_token` is the run's bearer token
        (omit it when the client itself was made with that token)."""
        return self._run(Call("POST", f"/v1/task-runs/{id}/start", _reader(StartedTaskRun), token=run_token))

    def task(self, id: str, *, run_token: str | None = None) -> TaskView:
        """The task as the agent sees it (`{id, name, task_item}`), through the run token."""
        return self._run(Call("GET", f"/v1/task-runs/{id}", _task_view, token=run_token))

    def complete(self, id: str, *, run_token: str | None = None) -> Completion:
        """Verify now; calling it again returns the same result and writes nothing."""
        return self._run(Call("POST", f"/v1/task-runs/{id}/complete", _reader(Completion), token=run_token))

    def get(self, id: str) -> TaskRun:
        """Verdict, score, axes, the frozen `snapshot` and the current criterion runs (org key)."""
        return self._run(Call("GET", f"/task-runs/{id}", _reader(TaskRun)))

    def list(self, *, benchmark_run_id: str | None = None) -> Iterator[TaskRun]:
        return self._pages("/task-runs", TaskRun.model_validate, benchmark_run_id=benchmark_run_id)

    def rescore(self, id: str) -> Completion:
        """Score the stored capture again (earlier criterion runs become `superseded`)."""
        return self._run(Call("POST", f"/task-runs/{id}/rescore", _reader(Completion)))

    def cancel(self, id: str) -> TaskRun:
        return self._run(Call("POST", f"/task-runs/{id}/cancel", _reader(TaskRun)))

    def events(self, id: str) -> Iterator[SandboxEvent]:
        """Every recorded interaction with the task run's sandboxes, oldest first."""
        return self._pages(f"/task-runs/{id}/events", SandboxEvent.model_validate)

    def state(self, id: str) -> bytes:
        """The captured state as a snapshot tar.gz (what `assay verify` reads)."""
        return self._run(Call("GET", f"/task-runs/{id}/state", lambda response: response.content))


class CriterionRuns(_Resource):
    def list(self, *, task_run_id: str | None = None) -> Iterator[CriterionRun]:
        return self._pages("/criterion-runs", CriterionRun.model_validate, task_run_id=task_run_id)

    def get(self, id: str) -> CriterionRun:
        """The authoritative record, with full `details` and `evidence` (also for scored runs)."""
        return self._run(Call("GET", f"/criterion-runs/{id}", _reader(CriterionRun)))

    def override(self, id: str, *, passed: bool, reason: str, score: float | None = None) -> CriterionRun:
        """Record a person's verdict; the task and benchmark run are rescored with it."""
        body = _body(passed=passed, reason=reason, score=score)
        return self._run(Call("POST", f"/criterion-runs/{id}/override", _reader(CriterionRun), json=body))


class Playgrounds(_Resource):
    def get(self, id: str) -> Playground:
        return self._run(Call("GET", f"/playgrounds/{id}", _reader(Playground)))

    def events(self, sandbox_id: str) -> Iterator[SandboxEvent]:
        """The events of one sandbox of a playground, oldest first."""
        return self._pages(f"/sandboxes/{sandbox_id}/events", SandboxEvent.model_validate)
