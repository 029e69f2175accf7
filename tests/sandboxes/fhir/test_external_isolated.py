"""`ASSAY_FHIR_ISOLATION=assay-store`: each playground gets its own store on a second Assay FHIR
server (`assay fhir-server`, built by `create_fhir_server` and run under uvicorn), driven through
the service's public API exactly as `test_external.py` drives the tag strategy (issue 5)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fhirpy import SyncFHIRClient
from sqlalchemy import create_engine, insert, select, update
from sqlalchemy.exc import NoResultFound
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.sandboxes.fhir.external import (
    SPACE_KEY,
    IsolatedFhir,
    MedplumProjects,
)
from assay.sandboxes.fhir.surface import external_of, seed_space
from assay.sandboxes.fhir.tables import FhirStoreRow, FhirVersion
from assay.sandboxes.registry import SURFACES
from assay.service.fhir_server import create_fhir_server
from assay.service.settings import Settings
from assay.store.models import Sandbox
from tests.sandboxes.conftest import free_port, serve
from tests.sandboxes.fhir.test_external import (
    book_with_an_absolute_reference,
    captured_relative,
    judge_the_reference_text,
    refusals_of_not_strict_bodies,
    started_run,
)
from tests.sandboxes.test_playgrounds import LIZ, _book, _fhir_benchmark, dataset_run
from tests.service.builders import error, ok
from tests.service.conftest import serving

if TYPE_CHECKING:
    from tests.service.conftest import Server

TOKEN = "second-server-token"
BOB_FILE = Path(__file__).parents[2] / "fixtures" / "fhir" / "synthea" / "hiv-2021"
BOB_FILE = BOB_FILE / "Bob965_Keeling57_3f6fd0bb-6cd3-eb3f-4401-cd38ace25f2b.json"


@dataclass
class SecondServer:
    """The 'external' Assay FHIR server, with faults a test can switch on."""

    url: str
    database: str
    faults: set[tuple[str, str]] = field(default_factory=set)
    """(method, last path segment) pairs answered with a 500 instead of reaching the server."""
    seen: list[str] = field(default_factory=list)
    """Every request the server received, as `METHOD path?query`."""
    canned: dict[tuple[str, str], tuple[int, bytes, dict[str, str]]] = field(default_factory=dict)
    """(method, last path segment) pairs answered with (status, raw body, headers) instead of
    reaching the server: what a real server may write that this one never does."""

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"})

    def store(self, playground_id: str) -> str:
        return f"/stores/assay-{playground_id}"

    def store_ids(self) -> set[str]:
        engine = create_engine(self.database)
        try:
            with engine.connect() as conn:
                return set(conn.execute(select(FhirStoreRow.id)).scalars())
        finally:
            engine.dispose()


class _Faulty:
    def __init__(self, app: Any, second: SecondServer):
        self.app, self.faults, self.seen, self.canned = app, second.faults, second.seen, second.canned

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = scope["query_string"].decode()
        self.seen.append(f"{scope['method']} {scope['path']}" + (f"?{query}" if query else ""))
        key = (scope["method"], scope["path"].rsplit("/", 1)[-1])
        if key in self.canned:
            status, body, headers = self.canned[key]
            media = "application/fhir+json"
            await Response(body, status, headers, media_type=media)(scope, receive, send)
        elif key in self.faults:
            outcome = {
                "resourceType": "OperationOutcome",
                "issue": [{"severity": "error", "code": "exception"}],
            }
            await JSONResponse(outcome, 500)(scope, receive, send)
        else:
            await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecondServer]:
    database = f"sqlite:///{tmp_path_factory.mktemp('second-fhir') / 'fhir.db'}"
    second = SecondServer("", database)
    app = _Faulty(create_fhir_server(database, token=TOKEN), second)
    for url in serve(app):  # type: ignore[arg-type]
        second.url = url
        yield second


@pytest.fixture
def isolated(second: SecondServer) -> Iterator[SecondServer]:
    yield second
    second.faults.clear()
    second.seen.clear()
    second.canned.clear()


@pytest.fixture
def forwarding(server: Server, isolated: SecondServer) -> Iterator[Server]:
    """A server on the shared one's database whose `Settings` give each playground a store on the
    second server (`assay-store`): the shared server and its environment are left alone."""
    changes = {"url": isolated.url, "isolation": "assay-store", "authorization": f"Bearer {TOKEN}"}
    with serving(server, surface_settings={"fhir": changes}) as forwarding:
        yield forwarding


def _restart_the_fhir_surface(server: Server) -> None:
    """What a restart does to the FHIR surface: its forwarder (and what it remembers) is closed
    and a new one opened from the settings."""
    assert server.deployment is not None
    SURFACES["fhir"].close(server.deployment)
    SURFACES["fhir"].open(server.deployment)


def test_playgrounds_in_stores_of_their_own(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    run = _fhir_benchmark(api, tasks=2, concurrency=2)
    first, other = run["task_runs"]
    token = run["bearer_token"]
    with forwarding.client(token) as agent, isolated.client() as remote:
        started = [ok(agent.post(tr["start_url"])) for tr in (first, other)]
        bases = [forwarding.url + s["endpoints"]["fhir"] for s in started]
        stores = [isolated.store(s["playground_id"]) for s in started]
        assert [remote.get(store).status_code for store in stores] == [200, 200]
        one = SyncFHIRClient(bases[0], authorization=f"Bearer {token}")
        two = SyncFHIRClient(bases[1], authorization=f"Bearer {token}")

        appointment_id = _book(one)
        _restart_the_fhir_surface(forwarding)  # the stores are found again from the playground ids
        found = one.resources("Appointment").search(patient=f"Patient/{LIZ}", status="booked").fetch_all()
        assert [a.id for a in found] == [appointment_id]
        assert two.resources("Appointment").fetch_all() == []
        on_server = remote.get(f"{stores[0]}/fhir/Appointment/{appointment_id}").json()
        assert on_server["id"] == appointment_id and "tag" not in on_server.get(
            "meta", {}
        )  # ids kept, no tag

        # Conditional update and delete, and type/system history: forwarded (the tag strategy 501s).
        liz = agent.get(f"{bases[0]}/Patient/{LIZ}").json()
        updated = agent.put(f"{bases[0]}/Patient", params={"_id": LIZ}, json={**liz, "gender": "other"})
        assert updated.status_code == 200, updated.text
        assert agent.get(f"{bases[1]}/Patient/{LIZ}").json()["gender"] == "female"
        created = agent.post(
            f"{bases[0]}/Patient",
            json={"resourceType": "Patient", "identifier": [{"system": "urn:t", "value": "1"}]},
        )
        assert created.status_code == 201 and created.headers["Location"].startswith(f"{bases[0]}/Patient/")
        paged = agent.get(f"{bases[0]}/Patient", params={"_count": "1"})
        [next_url] = [link["url"] for link in ok(paged)["link"] if link["relation"] == "next"]
        assert next_url.startswith(f"{bases[0]}/Patient?") and ok(agent.get(next_url))["entry"]
        assert agent.delete(f"{bases[0]}/Patient", params={"identifier": "urn:t|1"}).status_code == 204
        assert ok(agent.get(f"{bases[0]}/Patient", params={"identifier": "urn:t|1"}))["total"] == 0
        history = agent.get(f"{bases[0]}/Patient/_history")
        assert ok(history)["type"] == "history" and history.json()["total"] >= 3
        system = agent.get(f"{bases[0]}/_history")
        assert {e["resource"]["resourceType"] for e in ok(system)["entry"] if "resource" in e} >= {
            "Appointment"
        }
        for response in (updated, created, paged, history, system):
            assert isolated.url not in response.text  # the agent never sees the server
        assert all(e["fullUrl"].startswith(bases[0]) for e in history.json()["entry"])
        assert agent.get(f"{bases[0]}/Patient/$everything").status_code == 404  # no $operations

        scores = [ok(agent.post(tr["complete_url"]))["score"] for tr in (first, other)]
        assert scores == [1.0, 0.5]
        assert agent.get(f"{bases[0]}/Patient").status_code == 409
        assert [remote.get(store).status_code for store in stores] == [404, 404]  # deleted at teardown

    state = api.get(f"/task-runs/{first['id']}/state")
    with tarfile.open(fileobj=io.BytesIO(state.content)) as archive:
        names = archive.getnames()
        liz_file = archive.extractfile(f"snapshot/fhir/Patient/{LIZ}.json")
        assert liz_file is not None and json.load(liz_file)["gender"] == "other"
    assert f"snapshot/fhir/Appointment/{appointment_id}.json" in names
    assert ok(api.post(f"/task-runs/{first['id']}/rescore"))["score"] == 1.0


def test_a_get_on_the_base_with_a_query_is_forwarded_to_the_space(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    """A paging link on the base (HAPI's `[base]?_getpages=…`) or a system-level search reaches
    the playground's space (the Assay FHIR server itself serves neither: its own 405 comes back);
    the bare base stays Assay's 405, not forwarded."""
    with started_run(forwarding, api) as run:
        store = isolated.store(run.playground_id)
        isolated.seen.clear()
        paged = run.agent.get(run.base, params={"_getpages": "abc", "_getpagesoffset": "1"})
        assert isolated.seen == [f"GET {store}/fhir?_getpages=abc&_getpagesoffset=1"]
        assert paged.status_code == 405 and paged.json()["resourceType"] == "OperationOutcome"
        assert "allow" not in paged.headers  # the server's answer, passed through
        bare = run.agent.get(f"{run.base}/")
        assert (bare.status_code, bare.headers["allow"]) == (405, "POST")
        assert len(isolated.seen) == 1
        # Listed through the server that logged them: each app's event writer is its own, and a
        # listing flushes only the listing app's queue.
        with forwarding.client() as logged:
            listed = logged.get(f"/task-runs/{run.task_run['id']}/events", params={"limit": 100})
        events = ok(listed)["data"]
        assert [(e["method"], e["status"]) for e in events][-2:] == [("GET", 405), ("GET", 405)]


def test_bodies_that_are_not_strict_json_are_refused_before_forwarding(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    """The embedded surface's strict-JSON 400, the same OperationOutcome, and nothing sent."""
    with started_run(forwarding, api) as run, isolated.client() as remote:
        isolated.seen.clear()
        answers = refusals_of_not_strict_bodies(run.agent, run.base)
        assert isolated.seen == []
        embedded = refusals_of_not_strict_bodies(
            remote, f"{isolated.url}{isolated.store(run.playground_id)}/fhir"
        )
    assert answers == embedded and {status for status, _ in answers} == {400}


def test_a_server_error_during_capture_fails_complete_and_keeps_the_run_completable(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    with started_run(forwarding, api) as run, isolated.client() as remote:
        _book(run.fhir())
        isolated.faults.add(("GET", "Observation"))
        failed = run.complete()
        error(failed, 500, "INTERNAL_ERROR")
        message = failed.json()["error"]["message"]
        assert "answered 500" in message and "search Observation for the capture" in message
        assert isolated.url not in failed.text and "/stores/" not in failed.text  # complete is the agent's
        record = ok(api.get(f"/task-runs/{run.task_run['id']}"))
        assert (record["phase"], record["status"], record["criterion_runs"]) == ("started", "active", [])
        assert remote.get(isolated.store(run.playground_id)).status_code == 200

        isolated.faults.clear()
        completed = ok(run.complete())
        assert (completed["score"], completed["verdict"]) == (1.0, "pass")
        assert remote.get(isolated.store(run.playground_id)).status_code == 404


def test_a_failed_dataset_load_deletes_the_store_and_start_can_be_retried(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    before = isolated.store_ids()
    with forwarding.client(run["bearer_token"]) as agent:
        isolated.faults.add(("POST", "fhir"))  # the seeding batch to the store's base
        failed = agent.post(task_run["start_url"])
        error(failed, 500, "INTERNAL_ERROR")
        assert "failed to load the playground's datasets" in failed.json()["error"]["message"]
        assert isolated.url not in failed.text and "/stores/" not in failed.text  # start is the agent's
        assert ok(api.get(f"/task-runs/{task_run['id']}"))["status"] == "active"
        assert ok(api.get(f"/task-runs/{task_run['id']}"))["phase"] == "created"
        assert isolated.store_ids() == before  # opened, then closed again

        isolated.faults.clear()
        started = ok(agent.post(task_run["start_url"]))
        assert isolated.store_ids() == before | {f"assay-{started['playground_id']}"}
        assert ok(agent.post(task_run["complete_url"]))["score"] == 0.5
    assert isolated.store_ids() == before


def test_a_stateful_space_is_resumed_from_the_sandbox_row(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    """What a Medplum project needs after a restart (its server-assigned ids) is read back from the
    playground's `fhir` sandbox row; here the row of a real playground, the server a mock."""
    with started_run(forwarding, api) as run:
        playground_id = run.playground_id
        where = (Sandbox.playground_id == playground_id, Sandbox.type == "fhir")
        with forwarding.database.transaction() as session:
            sandbox = session.scalars(select(Sandbox).where(*where)).one()
            assert sandbox.credentials is not None
            assert sandbox.credentials[SPACE_KEY] == {
                "isolation": "assay-store",
                "server": isolated.url,
                "saved": {},
            }
            saved = {"project_id": "p", "client_id": "cli-7", "client_secret": "s"}
            sandbox.credentials = {SPACE_KEY: {"isolation": "medplum-project", "server": "x", "saved": saved}}
        forms: list[bytes] = []

        def token(request: httpx.Request) -> httpx.Response:
            forms.append(request.content)
            return httpx.Response(200, json={"access_token": "t"})

        client = httpx.Client(transport=httpx.MockTransport(token))
        medplum = IsolatedFhir(MedplumProjects("https://medplum.invalid/fhir/R4", client), client)
        space = medplum.space(playground_id, engine=forwarding.database.engine)
        assert space.headers == {"Authorization": "Bearer t"} and b"client_id=cli-7" in forms[0]
        with forwarding.database.transaction() as session:  # the row as seed wrote it, for teardown
            recorded = {"isolation": "assay-store", "server": isolated.url, "saved": {}}
            session.scalars(select(Sandbox).where(*where)).one().credentials = {SPACE_KEY: recorded}
        assert ok(run.complete())["score"] == 0.5


def test_a_failing_store_deletion_does_not_fail_complete(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    with started_run(forwarding, api) as run, isolated.client() as remote:
        store = isolated.store(run.playground_id)
        isolated.faults.add(("DELETE", store.rsplit("/", 1)[-1]))
        assert ok(run.complete())["score"] == 0.5
        assert remote.get(store).status_code == 200  # left on the server, and noted:
    with forwarding.database.transaction() as session:
        credentials = session.scalars(
            select(Sandbox.credentials).where(
                Sandbox.playground_id == run.playground_id, Sandbox.type == "fhir"
            )
        ).one()
    assert "500" in credentials[SPACE_KEY]["close_error"]


def test_the_fhir_server_manages_stores(isolated: SecondServer) -> None:
    with isolated.client() as remote:
        assert remote.put("/stores/demo-1").status_code == 201
        assert ok(remote.put("/stores/demo-1"))["fhir_base"] == f"{isolated.url}/stores/demo-1/fhir"
        created = remote.post("/stores/demo-1/fhir/Patient", json={"resourceType": "Patient"})
        assert created.status_code == 201
        assert remote.delete("/stores/demo-1").status_code == 204
        error(remote.delete("/stores/demo-1"), 404, "NOT_FOUND")
        gone = remote.get("/stores/demo-1/fhir/Patient")
        assert gone.status_code == 404 and gone.json()["resourceType"] == "OperationOutcome"
        error(remote.put("/stores/no%20spaces"), 422, "VALIDATION_ERROR")
    error(httpx.put(f"{isolated.url}/stores/demo-2"), 401, "UNAUTHORIZED")


def test_an_unknown_isolation_is_refused_when_settings_are_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ASSAY_FHIR_ISOLATION must be one of tag, assay-store"):
        Settings.from_env({"ASSAY_FHIR_ISOLATION": "per-tenant"})
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
    result = CliRunner().invoke(
        cli, ["serve", "--data-dir", str(tmp_path)], env={**env, "ASSAY_FHIR_ISOLATION": "per-tenant"}
    )
    assert result.exit_code == 2 and "ASSAY_FHIR_ISOLATION" in result.output


def test_assay_fhir_server_command_serves_stores(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
    port = free_port()
    command = [str(Path(sys.executable).parent / "assay"), "fhir-server", "--port", str(port)]
    database = f"sqlite:///{tmp_path / 'fhir.db'}"
    process = subprocess.Popen(
        [*command, "--database-url", database],
        stderr=subprocess.PIPE,
        env={**env, "ASSAY_FHIR_SERVER_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"},
    )
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        created = None
        for _ in range(200):
            try:
                created = httpx.put(f"http://127.0.0.1:{port}/stores/cli", headers=headers)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert created is not None and created.status_code == 201, created
        metadata = httpx.get(f"http://127.0.0.1:{port}/stores/cli/fhir/metadata", headers=headers)
        assert metadata.json()["resourceType"] == "CapabilityStatement"
        assert httpx.get(f"http://127.0.0.1:{port}/stores/cli").status_code == 401
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert f"http://127.0.0.1:{port}/stores/{{id}}/fhir" in stderr.decode()


def test_a_seed_that_fails_after_the_load_deletes_the_store(
    forwarding: Server, isolated: SecondServer
) -> None:
    """Whatever fails once the space is open (here: no `fhir` sandbox row to record it in) closes it
    again; only a failed load did, and a space opened for a start that never committed stayed."""
    assert forwarding.deployment is not None
    external = external_of(forwarding.deployment)
    assert isinstance(external, IsolatedFhir)
    before = isolated.store_ids()
    with pytest.raises(NoResultFound), forwarding.database.transaction() as session:
        seed_space(session, external, "pg_NOSANDBOXROW", [{"resourceType": "Patient", "id": "p"}])
    assert isolated.store_ids() == before


def test_a_server_resource_the_capture_cannot_hold_fails_complete_cleanly(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    """An id the embedded store cannot keep (over 64 characters; the second server's own write path
    refuses it, so the row is written straight into its tables) made `complete` a bare 500 from
    `LayerNotLoadable`; it is the capture failure: a named 500, nothing written, the run still started."""
    with started_run(forwarding, api) as run:
        store_id = f"assay-{run.playground_id}"
        engine = create_engine(isolated.database)
        try:
            with engine.begin() as conn:
                seq = conn.execute(select(FhirStoreRow.seq).where(FhirStoreRow.id == store_id)).scalar_one()
                long_id = "x" * 70
                row = {
                    "store_id": store_id,
                    "seq": seq + 1,
                    "resource_type": "Patient",
                    "resource_id": long_id,
                }
                row |= {
                    "version_id": "1",
                    "last_updated": "2026-01-01T00:00:00.000Z",
                    "deleted": False,
                    "body": json.dumps({"resourceType": "Patient", "id": long_id}),
                }
                conn.execute(insert(FhirVersion), [row])
                conn.execute(update(FhirStoreRow).where(FhirStoreRow.id == store_id).values(seq=seq + 1))
        finally:
            engine.dispose()
        failed = run.complete()
        error(failed, 500, "INTERNAL_ERROR")
        assert "cannot be captured" in failed.json()["error"]["message"]
        record = ok(api.get(f"/task-runs/{run.task_run['id']}"))
        assert (record["phase"], record["criterion_runs"]) == ("started", [])


def test_the_server_never_shows_through_to_the_agent(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    """A server writes its base into free text too (HAPI's `diagnostics`, narratives, headers), with
    `/` escaped as `\\/` by some encoders: the agent sees its Assay base in every one of them,
    never the server's host or the store's path; a real search and history come through mapped."""
    with started_run(forwarding, api) as run:
        space = f"{isolated.url}{isolated.store(run.playground_id)}/fhir"
        escaped = space.replace("/", "\\/")
        outcome = (
            '{"resourceType": "OperationOutcome", "text": {"status": "generated",'
            f' "div": "<div xmlns=\\"http://www.w3.org/1999/xhtml\\">Store {space}</div>"}},'
            ' "issue": [{"severity": "error", "code": "processing",'
            f' "diagnostics": "HAPI-0450: {escaped}\\/Patient\\/{LIZ} could not be read from {space}/",'
            f' "details": {{"text": "Partition at {space}?_id={LIZ}"}}}}]}}'
        )
        headers = {"Content-Location": f"{space}/Patient/{LIZ}/_history/1", "Location": f"{space}/"}
        isolated.canned[("GET", LIZ)] = (500, outcome.encode(), headers)
        failed = run.agent.get(f"{run.base}/Patient/{LIZ}")
        assert failed.status_code == 500
        [issue] = failed.json()["issue"]
        assert (
            issue["diagnostics"] == f"HAPI-0450: {run.base}/Patient/{LIZ} could not be read from {run.base}/"
        )
        assert issue["details"]["text"] == f"Partition at {run.base}?_id={LIZ}"
        assert failed.json()["text"]["div"].endswith(f"Store {run.base}</div>")
        assert failed.headers["content-location"] == f"{run.base}/Patient/{LIZ}/_history/1"
        assert failed.headers["location"] == f"{run.base}/"
        isolated.canned.clear()

        _book(run.fhir())
        answers = [
            failed,
            run.agent.get(
                f"{run.base}/Appointment", params={"_count": "1", "_include": "Appointment:patient"}
            ),
            run.agent.get(f"{run.base}/_history"),
            run.agent.get(f"{run.base}/metadata"),
        ]
        for answer in answers:
            seen = answer.text + json.dumps(dict(answer.headers))
            assert isolated.url not in seen and "/stores/" not in seen, answer.text


def test_an_absolute_reference_is_captured_relative(
    forwarding: Server, api: httpx.Client, isolated: SecondServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's absolute reference (under its Assay base) reaches the server as an absolute URL
    under the store's base, as some servers write references themselves; the capture keeps
    `Patient/<id>` (`captured_relative`)."""
    judge_the_reference_text(monkeypatch)
    with started_run(forwarding, api) as run, isolated.client() as remote:
        appointment_id = book_with_an_absolute_reference(run)
        path = f"{isolated.store(run.playground_id)}/fhir/Appointment/{appointment_id}"
        on_server = ok(remote.get(path))["participant"][0]["actor"]["reference"]
        assert on_server == f"{isolated.url}{isolated.store(run.playground_id)}/fhir/Patient/{LIZ}"
        captured_relative(api, run, appointment_id)


def test_a_dataset_with_unresolvable_conditional_references_seeds_the_space(
    forwarding: Server, api: httpx.Client, isolated: SecondServer
) -> None:
    """SPEC §5.1 keeps a conditional reference that resolves to nothing (Synthea's hiv-2021 files
    name practitioners and locations they do not include); seeding sent them to the server in a
    batch of PUTs, which resolved them and answered 412 per entry, so `start` failed (500) for every
    such dataset. Batch entries now keep them as sent (R4: transactions only), on the server too."""
    bundle = json.loads(BOB_FILE.read_text())
    run = dataset_run(api, "fhir", bundle)
    [task_run] = run["task_runs"]
    with forwarding.client(run["bearer_token"]) as agent:
        base = forwarding.url + ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        encounters = ok(agent.get(f"{base}/Encounter", params={"_count": "1000"}))["entry"]
        seeded = sum(1 for e in bundle["entry"] if e["resource"]["resourceType"] == "Encounter")
        assert len(encounters) == seeded
        practitioners = {e["resource"]["participant"][0]["individual"]["reference"] for e in encounters}
        assert all(text.startswith("Practitioner?identifier=") for text in practitioners)
