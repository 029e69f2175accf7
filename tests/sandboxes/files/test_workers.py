"""The files flow on `assay serve --workers 2` over PostgreSQL (issue 11): the SFTP listener runs
once, in the listener process `serve` supervises, and each upload lands in the playground of the
task run whose password it logged in with — two task runs started side by side, one uploading the
referral where the task asks and one to a misspelt path, grade `pass` and `fail` respectively."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from tests.sandboxes.files.conftest import Served, assay_serve, sftp_client
from tests.sandboxes.files.test_surface import REFERRAL, _agree, _benchmark
from tests.service.builders import ok, start_run
from tests.service.conftest import POSTGRES_URL

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not POSTGRES_URL,
        reason="needs PostgreSQL: set ASSAY_TEST_POSTGRES_URL (.ci/run starts one and sets it)",
    ),
]


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Served]:
    """`assay serve --workers 2 --sftp-port 0` on a fresh PostgreSQL database, until the module ends."""
    database_url: str = request.getfixturevalue("_postgres_database")
    data_dir = tmp_path_factory.mktemp("assay-workers")
    with assay_serve(data_dir, "--workers", "2", database_url=database_url) as served:
        yield served


def test_two_workers_route_each_sftp_upload_to_its_playground(workers: Served, tmp_path: Path) -> None:
    with workers.client() as api:
        run = start_run(api, _benchmark(api, tasks=2))
        with workers.client(run.token) as agent:
            started = [ok(agent.post(task_run["start_url"])) for task_run in run.task_runs]
            logins = [s["credentials"]["sftp"] for s in started]
            assert len({s["port"] for s in logins}) == 1 and logins[0]["port"] > 0  # one listener
            assert logins[0]["username"] != logins[1]["username"]
            clients = [sftp_client(login) for login in logins]
            for client, path in zip(clients, ("outbox/referral.json", "outbox/referal.json"), strict=True):
                request = json.loads(client.open("inbox/request.json").read())
                assert request == REFERRAL
                client.mkdir("outbox")
                client.putfo(io.BytesIO(json.dumps(request).encode()), path)
            for client, start, path in zip(clients, started, ("referral", "referal"), strict=True):
                assert client.listdir("outbox") == [f"{path}.json"]
                listed = ok(agent.get(start["endpoints"]["files"]))["data"]
                assert sorted(entry["path"] for entry in listed) == [
                    "inbox/order.txt",
                    "inbox/request.json",
                    f"outbox/{path}.json",
                ]
            got = agent.get(f"{started[0]['endpoints']['files']}/outbox/referral.json")
            assert got.status_code == 200 and json.loads(got.content) == REFERRAL
            completed = [ok(agent.post(task_run["complete_url"])) for task_run in run.task_runs]
            for client in clients:
                client.close()
            with pytest.raises(paramiko.AuthenticationException):
                sftp_client(logins[0])
        assert [c["verdict"] for c in completed] == ["pass", "partial"], completed
        passed, failed = (c["checks"][0] for c in completed)
        assert passed["evidence"]["matchedPaths"] == ["outbox/referral.json"]
        assert failed["passed"] is False and failed["evidence"]["matchedPaths"] == []
        assert "outbox/referral.json" in failed["details"]
        for task_run, done in zip(run.task_runs, completed, strict=True):
            _agree(api, task_run["id"], done, tmp_path)
