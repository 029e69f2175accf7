"""A `start` whose transaction rolls back after the files surface seeded its tree leaves no tree
behind, on local storage and on moto's S3, on SQLite and PostgreSQL.

The faults come from a throwaway surface registered after `files` (so its `seed` runs once the
tree is written): its seed raises, or takes the run's last concurrency slot in the start's own
transaction (as a sibling's start winning the race would), or makes the commit fail. Each time
the start answers an error, the task run is still `created` and starts again, and the storage
holds no tree for the playground of the failed attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx
import pytest
from sqlalchemy import event, update
from sqlalchemy.orm import Session

from assay.sandboxes import BaseSurface, RunContext, registry
from assay.sandboxes.files import FileStorage
from assay.sandboxes.files.surface import storage_of
from assay.store.models import BenchmarkRun, Sandbox, TaskRun
from tests.sandboxes.files.conftest import MotoS3
from tests.service.builders import error, make_dataset, ok, start_run, unique
from tests.service.conftest import Server, serving

Json = dict[str, Any]
SEEDED = {"files": [{"path": "inbox/order.txt", "content": "order 42\n"}]}


class FaultAfterFiles(BaseSurface):
    """Fails the start its `seed` runs in, in the way `fault` names; remembers the playgrounds."""

    name = "fault"

    def __init__(self, fault: str):
        self.fault = fault
        self.playgrounds: list[str] = []

    def endpoints(self, base: str) -> dict[str, str]:
        return {}

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        self.playgrounds.append(run.playground_id)
        if self.fault == "seed raises":
            raise RuntimeError("a surface's seed failed")
        if self.fault == "slot taken":
            task_run = run.session.get(TaskRun, run.task_run_id)
            assert task_run is not None
            run.session.execute(
                update(BenchmarkRun)
                .where(BenchmarkRun.id == task_run.benchmark_run_id)
                .values(task_runs_running=BenchmarkRun.concurrency)
            )
        if self.fault == "commit fails":

            def refuse(_session: Session) -> None:
                raise RuntimeError("the commit failed")

            event.listen(run.session, "before_commit", refuse, once=True)


@pytest.fixture(scope="module", params=["local", "s3"])
def files_server(request: pytest.FixtureRequest, server: Server) -> Iterator[Server]:
    """The session's server (SQLite or PostgreSQL) with its own storage: a local folder, or a
    bucket on moto's S3."""
    if request.param == "local":
        yield server
        return
    moto_s3: MotoS3 = request.getfixturevalue("moto_s3")
    files = {
        "storage_url": f"s3://{moto_s3.new_bucket()}/deployment",
        "storage_options": json.dumps(moto_s3.options),
    }
    with serving(server, surface_settings={"files": files}) as fresh:
        yield fresh


def _task_run(api: httpx.Client) -> tuple[str, Json]:
    """A run token and the task run of a one-task benchmark seeding one file."""
    dataset = make_dataset(api, "files", SEEDED)
    benchmark = ok(api.post("/benchmarks", json={"name": unique("rollback"), "concurrency": 1}), 201)
    body = {"benchmark_id": benchmark["id"], "name": "t", "dataset_ids": [dataset["id"]]}
    ok(api.post("/tasks", json=body), 201)
    run = start_run(api, benchmark["id"])
    [task_run] = run.task_runs
    return run.token, task_run


def _has_tree(storage: FileStorage, playground_id: str) -> bool:
    return bool(storage.fs.exists(storage.key(playground_id)))


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ("seed raises", 500, "INTERNAL_ERROR"),
        ("slot taken", 409, "CONFLICT"),
        ("commit fails", 500, "INTERNAL_ERROR"),
    ],
)
def test_a_start_that_rolls_back_leaves_no_files_behind(
    files_server: Server, fault: str, status: int, code: str
) -> None:
    assert files_server.deployment is not None
    storage = storage_of(files_server.deployment)
    surface = FaultAfterFiles(fault)
    with files_server.client() as api:
        token, task_run = _task_run(api)
        # A connection of its own: after answering a 500 the server closes it.
        with files_server.client(token) as agent:
            registry.register(surface)
            try:
                error(agent.post(task_run["start_url"]), status, code)
            finally:
                registry.unregister(surface.name)
        [failed] = surface.playgrounds
        assert not _has_tree(storage, failed)

        with files_server.client(token) as agent:
            shown = ok(agent.get(f"/v1/task-runs/{task_run['id']}"))
            assert (shown["phase"], shown["status"]) == ("created", "active")
            started = ok(agent.post(task_run["start_url"]))
            listed = ok(agent.get(started["endpoints"]["files"]))["data"]
            assert [entry["path"] for entry in listed] == ["inbox/order.txt"]
            assert started["playground_id"] != failed and _has_tree(storage, started["playground_id"])
            ok(agent.post(task_run["complete_url"]))
