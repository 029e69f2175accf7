"""Tool tests run against a real server (the service suite's fixtures) with the demo's benchmark
published; the agent clients' tests (`tests/clients/`) share the `front_office` fixture.
`scores_like_the_scripted_agent` is how the tools tests work each demo task through tools."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import anyio
import httpx
import pytest

from assay.client import Assay
from assay.clients.demo import PACKAGE
from assay.clients.demo.runner import _for_this_build
from assay.clients.packages import push, read_package
from tests.service.conftest import Server
from tests.service.tools.support import TOOL_ACTIONS, create_run, scripted_scores


@pytest.fixture(scope="module")
def front_office(server: Server) -> Iterator[str]:
    """The demo's benchmark, published under a name of this module's own: `slug@version`."""
    package, _ = _for_this_build(read_package(PACKAGE))
    package = replace(package, name=f"Front office {uuid.uuid4().hex[:8]}")
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        report = push(client, package)
        version = client.benchmarks.publish(report.benchmark_id)
    yield f"{version.slug}@{version.version}"


@dataclass(frozen=True)
class TaskTurn:
    """One demo task's started task run, for a test to work through tools."""

    name: str
    task_run_id: str
    token: str
    http: httpx.AsyncClient
    """Bound to the server, carrying the run token."""


WorkTask = Callable[[TaskTurn], Awaitable[Any]]


@pytest.fixture
def scores_like_the_scripted_agent(server: Server, front_office: str) -> Callable[[WorkTask], None]:
    """Asserts that a new run of the demo's benchmark, each task started, worked by `work` and
    completed, scores task by task what the scripted agent scores through the real protocols."""

    def check(work: WorkTask) -> None:
        expected = scripted_scores(server, front_office)
        token, task_runs = create_run(server, front_office)

        async def each_task() -> dict[str, Any]:
            scores = {}
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
                for name, task_run_id in task_runs.items():
                    (await http.post(f"/v1/task-runs/{task_run_id}/start")).raise_for_status()
                    await work(TaskTurn(name, task_run_id, token, http))
                    done = await http.post(f"/v1/task-runs/{task_run_id}/complete")
                    scores[name] = done.json()["score"]
            return scores

        assert anyio.run(each_task) == expected
        assert len(expected) == len(TOOL_ACTIONS) == 8 and any(score == 1 for score in expected.values())

    return check
