"""`Assay` and `AsyncAssay`: the API key, base URL and retry policy, and the resources over them.

Configuration, most specific first: the constructor's arguments, then `ASSAY_API_KEY` and
`ASSAY_BASE_URL`, then `http://127.0.0.1:8400` (what `assay serve` listens on).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

import httpx

from assay.client._http import AsyncEngine, Call, RetryPolicy, SyncEngine
from assay.client._resources import (
    ApiKeys,
    BenchmarkRuns,
    Benchmarks,
    Criteria,
    CriterionRuns,
    Datasets,
    Environments,
    Playgrounds,
    Solvers,
    TaskRuns,
    Tasks,
)

__all__ = ["DEFAULT_BASE_URL", "Assay", "AsyncAssay"]

DEFAULT_BASE_URL = "http://127.0.0.1:8400"


class _Resources:
    """The resource attributes both clients expose (docs/sdk.md)."""

    criteria: Criteria
    benchmarks: Benchmarks
    tasks: Tasks
    datasets: Datasets
    environments: Environments
    solvers: Solvers
    api_keys: ApiKeys
    benchmark_runs: BenchmarkRuns
    task_runs: TaskRuns
    criterion_runs: CriterionRuns
    playgrounds: Playgrounds

    def _attach(self, engine: Any) -> None:
        self.criteria = Criteria(engine)
        self.benchmarks = Benchmarks(engine)
        self.tasks = Tasks(engine)
        self.datasets = Datasets(engine)
        self.environments = Environments(engine)
        self.solvers = Solvers(engine)
        self.api_keys = ApiKeys(engine)
        self.benchmark_runs = BenchmarkRuns(engine)
        self.task_runs = TaskRuns(engine)
        self.criterion_runs = CriterionRuns(engine)
        self.playgrounds = Playgrounds(engine)


def _settings(api_key: str | None, base_url: str | None) -> tuple[str | None, str]:
    key = api_key if api_key is not None else os.environ.get("ASSAY_API_KEY")
    url = base_url or os.environ.get("ASSAY_BASE_URL") or DEFAULT_BASE_URL
    return key, url.rstrip("/")


def _health(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    return body


class Assay(_Resources):
    """Synchronous client::

    from assay.client import Assay

    with Assay(api_key="vk_…") as assay:
        task = assay.tasks.create(benchmark_id=bench.id, name="Book the follow-up")
        for criterion in assay.criteria.list(task_id=task.id):
            print(criterion.label)
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        http_client: httpx.Client | None = None,
        **retry_options: Any,
    ):
        self.api_key, self.base_url = _settings(api_key, base_url)
        self._http = http_client or httpx.Client(base_url=self.base_url, timeout=timeout)
        retry = RetryPolicy(max_retries, backoff, max_retry_wait, **retry_options)
        self._engine = SyncEngine(self._http, self.api_key, retry)
        self._attach(self._engine)

    def health(self) -> dict[str, Any]:
        """`GET /healthz` (no key needed)."""
        return self._engine.run(Call("GET", "/healthz", _health))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Assay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncAssay(_Resources):
    """Asynchronous client: the same resources; await each call and `async for` over lists::

    async with AsyncAssay() as assay:
        run = await assay.benchmark_runs.create(benchmark="front-office@1")
        async for task_run in assay.task_runs.list(benchmark_run_id=run.benchmark_run_id):
            ...
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        http_client: httpx.AsyncClient | None = None,
        **retry_options: Any,
    ):
        self.api_key, self.base_url = _settings(api_key, base_url)
        self._http = http_client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout)
        retry = RetryPolicy(max_retries, backoff, max_retry_wait, **retry_options)
        self._engine = AsyncEngine(self._http, self.api_key, retry)
        self._attach(self._engine)

    async def health(self) -> dict[str, Any]:
        """`GET /healthz` (no key needed)."""
        return await self._engine.run(Call("GET", "/healthz", _health))

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncAssay:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
