"""A PostgreSQL restart or stop under load: clients are told "unavailable, retry" (503 with
`Retry-After` on HTTP, an OperationOutcome on FHIR, `AE` on MLLP), never a 500; the service heals
without a restart (the first request, SFTP login and MLLP message after a restart succeed); every
acknowledged write is in the graded state and has its event.

Each test runs its own throwaway PostgreSQL cluster (initdb + pg_ctl on a free port in a temp dir,
as `.ci/run` does) and restarts or stops only that one; skipped when initdb or pg_ctl is not on
PATH. Every wait is bounded; nothing is timed.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import paramiko
import pytest
from hl7.client import MLLPClient

from assay.formats.hl7 import parse_message

from .builders import NOTE_WRITTEN, ok, one_patient_bundle
from .processes import Served, free_port, start_serve, stop

Json = dict[str, Any]
CLIENTS = 4
"""Agent threads writing FHIR resources through the faults (light load: the machine is shared)."""


@dataclass
class Cluster:
    """A PostgreSQL cluster of this test's own: restarting it disturbs nobody else."""

    root: Path
    port: int
    as_postgres: bool

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://assay@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        command = ["pg_ctl", "-D", str(self.root / "data"), *args]
        if self.as_postgres:
            command = ["su", "postgres", "-s", "/bin/bash", "-c", " ".join(f"'{a}'" for a in command)]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        )
        self.ctl("-o", options, "-l", str(self.root / "log"), "-w", "start")

    def stop(self) -> None:
        self.ctl("-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if not (shutil.which("initdb") and shutil.which("pg_ctl")):
        pytest.skip("initdb and pg_ctl are not on PATH")
    as_postgres = os.getuid() == 0
    # Not under pytest's temp dir: as root that is private to root, and the cluster runs as postgres.
    root = Path(tempfile.mkdtemp(prefix="assay-own-pg-"))
    if as_postgres:
        try:
            shutil.chown(root, "postgres")
        except LookupError:
            pytest.skip("running as root without a postgres user to run the cluster")
    initdb = ["initdb", "-D", str(root / "data"), "-U", "assay", "--auth=trust"]
    if as_postgres:
        initdb = ["su", "postgres", "-s", "/bin/bash", "-c", " ".join(initdb)]
    subprocess.run(initdb, check=True, capture_output=True, timeout=180)
    found = Cluster(root, free_port(), as_postgres)
    found.start()
    try:
        yield found
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            found.ctl("-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


def _catalog(api: httpx.Client) -> str:
    tag = uuid.uuid4().hex[:8]
    data = one_patient_bundle("Outage")
    dataset = ok(api.post("/datasets", json={"name": f"ehr {tag}", "type": "fhir", "data": data}), 201)
    benchmark = ok(api.post("/benchmarks", json={"name": f"outage {tag}", "concurrency": CLIENTS}), 201)
    task = ok(
        api.post(
            "/tasks", json={"benchmark_id": benchmark["id"], "name": "note", "dataset_ids": [dataset["id"]]}
        ),
        201,
    )
    ok(api.post("/criteria", json={"task_id": task["id"], "label": "note", "assertion": NOTE_WRITTEN}), 201)
    return str(benchmark["id"])


def _note() -> Json:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "urn:test", "code": "note"}]},
        "subject": {"reference": "Patient/p1"},
    }


def _hl7(facility: str, control: str) -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|{control}|P|2.5.1\r"
        "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
    )


@dataclass
class Agent:
    """One started task run and what its agent was told."""

    run: Json
    task_run: Json
    started: Json
    created: list[str] = field(default_factory=list)
    """Ids of the resources whose create was acknowledged (201)."""
    refused: list[httpx.Response] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.run['bearer_token']}"}

    @property
    def fhir(self) -> str:
        return httpx.URL(self.started["endpoints"]["fhir"]).raw_path.decode()


def _agents(served: Served, key: str, count: int) -> list[Agent]:
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        benchmark_id = _catalog(api)
        agents = []
        for _ in range(count):
            run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id}), 201)
            [task_run] = run["task_runs"]
            started = ok(
                api.post(task_run["start_url"], headers={"Authorization": f"Bearer {run['bearer_token']}"})
            )
            agents.append(Agent(run, task_run, started))
    return agents


def _write_until(served: Served, agent: Agent, done: threading.Event) -> None:
    with httpx.Client(base_url=served.url, headers=agent.headers, timeout=30) as client:
        while not done.is_set():
            try:
                answer = client.post(f"{agent.fhir}/Observation", json=_note())
            except httpx.TransportError:
                continue
            if answer.status_code == 201:
                agent.created.append(answer.json()["id"])
            else:
                agent.refused.append(answer)
                time.sleep(0.05)


def _assert_unavailable_outcome(answer: httpx.Response) -> None:
    """A FHIR answer that says "temporarily unavailable, retry": 503, `Retry-After`, OperationOutcome."""
    assert answer.status_code == 503, (answer.status_code, answer.text)
    assert int(answer.headers["retry-after"]) >= 1
    body = answer.json()
    assert body["resourceType"] == "OperationOutcome", body
    assert body["issue"][0]["code"] == "transient", body


def _events(served: Served, key: str, task_run_id: str) -> list[Json]:
    found: list[Json] = []
    params: dict[str, Any] = {"limit": 100}
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        while True:
            page = ok(api.get(f"/task-runs/{task_run_id}/events", params=params))
            found += page["data"]
            if not page["_meta"]["next"]:
                return found
            params["cursor"] = page["_meta"]["next"]


def _wait_for(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except (httpx.TransportError, AssertionError):
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.2)


def test_restart_and_stop_under_load_answer_503_and_lose_no_acknowledged_write(
    cluster: Cluster, tmp_path: Path
) -> None:
    key = "vk_outage_" + uuid.uuid4().hex
    served = start_serve(tmp_path / "data", database_url=cluster.url, key=key, workers=2)
    try:
        agents = _agents(served, key, CLIENTS)
        done = threading.Event()
        writers = [threading.Thread(target=_write_until, args=(served, agent, done)) for agent in agents]
        for writer in writers:
            writer.start()
        try:
            _wait_for(lambda: all(len(agent.created) >= 3 for agent in agents), "writes before the faults")
            cluster.restart()  # `pg_ctl restart -m fast` under load
            time.sleep(1)
            cluster.stop()
            time.sleep(1)  # writes are refused meanwhile: 503
            # A `complete` and an MLLP message while the database is down: "retry", not a failure.
            first = agents[0]
            with httpx.Client(base_url=served.url, headers=first.headers, timeout=30) as client:
                completed = client.post(first.task_run["complete_url"])
                assert completed.status_code == 503, completed.text
                assert int(completed.headers["retry-after"]) >= 1
                error = completed.json()["error"]
                assert error["code"] == "SERVICE_UNAVAILABLE" and error["details"]["dependency"] == "database"
                health = client.get("/healthz")
                assert health.status_code == 503 and health.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
            hl7 = first.started["credentials"]["hl7"]
            with MLLPClient("127.0.0.1", hl7["port"]) as mllp:
                ack = parse_message(mllp.send_message(_hl7(hl7["receiving_facility"], "DOWN-1")).decode())
            assert ack.read("MSA.1").value == "AE", ack
            assert ack.read("MSA.2").value == "DOWN-1"
            assert ack.read("ERR.3.1").value == "207"
            cluster.start()
            before = [len(agent.created) for agent in agents]
            _wait_for(
                lambda: all(len(a.created) >= n + 3 for a, n in zip(agents, before, strict=True)),
                "writes after the database is back",
            )
        finally:
            done.set()
            for writer in writers:
                writer.join(timeout=60)

        refused = [answer for agent in agents for answer in agent.refused]
        assert refused, "no write met the outage"
        for answer in refused:
            _assert_unavailable_outcome(answer)

        # Every acknowledged write is in the state and has its event.
        for agent in agents:
            with httpx.Client(base_url=served.url, headers=agent.headers, timeout=60) as client:
                for ident in agent.created[:: max(1, len(agent.created) // 10)]:
                    assert client.get(f"{agent.fhir}/Observation/{ident}").status_code == 200
            events = _events(served, key, agent.task_run["id"])
            logged = {
                (event.get("response") or {}).get("id")
                for event in events
                if event["type"] == "fhir_request" and event["status"] == 201
            }
            assert set(agent.created) <= logged, sorted(set(agent.created) - logged)[:5]
        with httpx.Client(base_url=served.url, headers=first.headers, timeout=60) as client:
            assert ok(client.post(first.task_run["complete_url"]))["phase"] == "completed"
            assert ok(client.get("/healthz"))["status"] == "ok"
    finally:
        stop(served, hard=True)


def test_first_request_login_and_message_after_a_restart_succeed(cluster: Cluster, tmp_path: Path) -> None:
    """No traffic during the restart: the pooled connections the server closed are not handed
    out afterwards (an API request answered 500 and the first SFTP login of a run was refused as a
    wrong password)."""
    key = "vk_heal_" + uuid.uuid4().hex
    # The sweeper off: its next pass would meet a dead connection first and make the pool drop them all.
    quiet = {"ASSAY_SWEEP_INTERVAL": "3600"}
    served = start_serve(tmp_path / "data", database_url=cluster.url, key=key, workers=1, env=quiet)
    try:
        [agent] = _agents(served, key, 1)
        sftp = agent.started["credentials"]["sftp"]
        hl7 = agent.started["credentials"]["hl7"]

        def create(_: int) -> int:
            with httpx.Client(base_url=served.url, headers=agent.headers, timeout=30) as client:
                return client.post(f"{agent.fhir}/Observation", json=_note()).status_code

        with ThreadPoolExecutor(12) as pool:
            # Several pooled connections in use before the restart, and as many requests at once after it.
            assert list(pool.map(create, range(24))) == [201] * 24
            cluster.restart()
            assert list(pool.map(create, range(24))) == [201] * 24
        cluster.restart()
        transport = paramiko.Transport(("127.0.0.1", sftp["port"]))
        try:
            transport.connect(username=sftp["username"], password=sftp["password"])
            files = paramiko.SFTPClient.from_transport(transport)
            assert files is not None
            files.putfo(io.BytesIO(b"after the restart"), "after.txt")
            files.close()
        finally:
            transport.close()
        cluster.restart()
        with MLLPClient("127.0.0.1", hl7["port"]) as mllp:
            ack = parse_message(mllp.send_message(_hl7(hl7["receiving_facility"], "AFTER-1")).decode())
        assert ack.read("MSA.1").value == "AA", ack
    finally:
        stop(served, hard=True)
