"""Audit of the FHIR surface, the event log and captured state against SPEC §1.1, §5, §5.2 and §6,
driven through the real server: each test pins a discrepancy or a 500 found by driving it.

JSON that Python's `json` reads but RFC 8259 does not allow (NaN, Infinity, numbers that overflow to
infinity, lone UTF-16 surrogates) used to be stored: afterwards the event list and the state tar.gz
answered 500 on both backends, and on PostgreSQL the event insert failed *after* the FHIR write had
committed, so the agent got a 422 for a resource that was in fact created.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, update

from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.store import embedded_fhir
from assay.sandboxes.fhir.tables import FhirStoreRow, FhirVersion
from assay.sandboxes.registry import DATASET_TYPES
from tests.service.builders import Run, error, make_benchmark, ok, start_run, unique
from tests.service.conftest import Server

Json = dict[str, Any]
NOT_STRICT_JSON = [
    pytest.param(b'{"resourceType": "Patient", "active": NaN}', id="NaN"),
    pytest.param(b'{"resourceType": "Patient", "active": -Infinity}', id="Infinity"),
    pytest.param(b'{"resourceType": "Patient", "multipleBirthInteger": 1e999}', id="overflow"),
    pytest.param(b'{"resourceType": "Patient", "name": [{"family": "\\ud800"}]}', id="lone-surrogate"),
]


@contextmanager
def _started(server: Server, api: httpx.Client) -> Iterator[tuple[httpx.Client, str, Json]]:
    """An agent client with a started task run (no datasets); its FHIR base path and task run."""
    catalog = make_benchmark(api, [[]])
    run = start_run(api, catalog.benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        started = ok(agent.post(task_run["start_url"]))
        yield agent, started["endpoints"]["fhir"], task_run


@dataclass
class _DatasetStart:
    """The first start of a one-task run whose environment holds one dataset."""

    response: httpx.Response
    run: Run
    dataset_id: str


def _start_with_dataset(server: Server, api: httpx.Client, kind: str, data: Json) -> _DatasetStart:
    dataset = ok(api.post("/datasets", json={"name": unique("d"), "type": kind, "data": data}), 201)
    environment = ok(api.post("/environments", json={"name": "env", "dataset_ids": [dataset["id"]]}), 201)
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique(kind), "environment_id": environment["id"]}), 201
    )
    ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
    run = start_run(api, benchmark["id"])
    with server.client(run.token) as agent:
        return _DatasetStart(agent.post(run.task_runs[0]["start_url"]), run, dataset["id"])


def _outcome(response: httpx.Response, status: int) -> Json:
    assert response.status_code == status, response.text
    body: Json = response.json()
    assert body["resourceType"] == "OperationOutcome" and body["issue"], body
    return body


@pytest.mark.parametrize("body", NOT_STRICT_JSON)
def test_fhir_writes_refuse_json_that_is_not_strict(server: Server, api: httpx.Client, body: bytes) -> None:
    with _started(server, api) as (agent, base, task_run):
        headers = {"Content-Type": "application/fhir+json"}
        _outcome(agent.post(f"{base}/Patient", content=body, headers=headers), 400)
        _outcome(agent.put(f"{base}/Patient/p1", content=body.replace(b"{", b'{"id": "p1", ', 1)), 400)
        bundle = b'{"resourceType": "Bundle", "type": "batch", "entry": [{"resource": %s, ' % body
        bundle += b'"request": {"method": "POST", "url": "Patient"}}]}'
        _outcome(agent.post(base, content=bundle, headers=headers), 400)
        assert ok(agent.get(f"{base}/Patient"))["total"] == 0
        ok(agent.post(task_run["complete_url"]))
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    assert [e["status"] for e in events] == [400, 400, 400, 200]
    state = api.get(f"/task-runs/{task_run['id']}/state")
    assert state.status_code == 200, state.text


def test_event_bodies_that_are_not_strict_json_are_kept_as_text(server: Server, api: httpx.Client) -> None:
    """A `_search` form body is not JSON at all; a NaN one is kept verbatim rather than breaking the list."""
    with _started(server, api) as (agent, base, task_run):
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        ok(agent.post(f"{base}/Patient/_search", content=b"name=NaN&_count=1", headers=form))
        agent.post(f"{base}/Patient", content=b'{"resourceType": "Patient", "a": NaN}')
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    assert [e["request"] for e in events] == ["name=NaN&_count=1", '{"resourceType": "Patient", "a": NaN}']


def test_a_nul_in_the_path_is_an_operation_outcome_and_an_event(server: Server, api: httpx.Client) -> None:
    """PostgreSQL text holds no NUL: recording `/Patient/a%00b` failed after the FHIR work was done
    and the agent got a 422 envelope for a plain 404 read."""
    with _started(server, api) as (agent, base, task_run):
        _outcome(agent.get(f"{base}/Patient/a%00b"), 404)
        _outcome(agent.put(f"{base}/Patient/a%00b", json={"resourceType": "Patient", "id": "a\x00b"}), 422)
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    assert [(e["method"], e["status"]) for e in events] == [("GET", 404), ("PUT", 422)]
    assert events[0]["path"].endswith("/fhir/Patient/a\\x00b")


def test_a_failed_start_repeats_its_reason(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §1.1: start of a failed task run is a 409 with the reason, the second time too."""
    # Stored while the voice surface was registered; gone when the run starts.
    loaders = {kind: surface for kind, surface in DATASET_TYPES.items() if kind != "voice"}
    monkeypatch.setattr("assay.sandboxes.datasets.DATASET_TYPES", loaders)
    started = _start_with_dataset(server, api, "voice", {"turns": []})
    first = error(started.response, 409, "CONFLICT")
    with server.client(started.run.token) as agent:
        again = error(agent.post(started.run.task_runs[0]["start_url"]), 409, "CONFLICT")
    assert first == again == {"reason": "dataset type voice is not supported"}


def _state_ids(api: httpx.Client, task_run_id: str) -> set[str]:
    state = api.get(f"/task-runs/{task_run_id}/state")
    assert state.status_code == 200, state.text
    with tarfile.open(fileobj=io.BytesIO(state.content)) as archive:
        return {
            name.rsplit("/", 1)[1].removesuffix(".json") for name in archive.getnames() if "/fhir/" in name
        }


def test_a_write_that_races_complete_is_refused_or_captured(server: Server, api: httpx.Client) -> None:
    """SPEC §1.1: once a task run ends its surfaces refuse traffic, so the captured state is final.
    A write that had passed the surface's open check before `complete` committed still landed after
    the capture (201 to the agent, absent from the score). The store now re-checks under its lock."""
    with _started(server, api) as (agent, base, task_run):
        created = ok(agent.post(f"{base}/Patient", json={"resourceType": "Patient"}), 201)
        ok(agent.post(task_run["complete_url"]))
    playground_id = ok(api.get(f"/task-runs/{task_run['id']}"))["playground_id"]
    fhir = embedded_fhir(server.database.engine)
    # The write the surface let through just before complete committed:
    with pytest.raises(FhirError) as refused, fhir.writing(playground_id) as tx:
        tx.put({"resourceType": "Patient"}, "late")
    assert refused.value.status == 409
    assert _state_ids(api, task_run["id"]) == {created["id"]}


def test_fhir_surface_answers_unknown_paths_and_methods_with_operation_outcome(
    server: Server, api: httpx.Client
) -> None:
    """SPEC §5.2: FHIR errors are OperationOutcome; unrouted paths under the base were the §5 envelope
    (a FHIR client cannot read it) and were missing from the event log."""
    with _started(server, api) as (agent, base, task_run):
        _outcome(agent.get(f"{base}/Patient/x/y/z"), 404)
        _outcome(agent.get(f"{base}/Patient/..%2F..%2Fsecret"), 404)
        _outcome(agent.request("PATCH", f"{base}/metadata"), 405)
        at_base = agent.get(base)  # the base itself takes only POST (transaction, batch)
        assert _outcome(at_base, 405) and at_base.headers["allow"] == "POST"
    events = ok(api.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
    statuses = [(e["method"], e["status"]) for e in events]
    assert statuses == [("GET", 404), ("GET", 404), ("PATCH", 405), ("GET", 405)]


def test_strict_json_check_leaves_ordinary_unicode_and_numbers_alone(
    server: Server, api: httpx.Client
) -> None:
    body = {
        "resourceType": "Patient",
        "name": [{"family": "Müller 😀 NaN Infinity"}],
        "multipleBirthInteger": 2,
    }
    with _started(server, api) as (agent, base, _):
        created = ok(agent.post(f"{base}/Patient", content=json.dumps(body).encode()), 201)
        assert created["name"] == body["name"]
        raw = '{"resourceType": "Patient", "name": [{"family": "\\ud83d\\ude00"}], "extension": [{"url": "urn:x", "valueDecimal": 1e300}]}'
        assert ok(agent.post(f"{base}/Patient", content=raw.encode()), 201)["name"][0]["family"] == "😀"


@pytest.mark.parametrize(
    "media_type", ["application/fhir+xml", "text/plain", "application/x-www-form-urlencoded"]
)
def test_a_body_in_a_format_the_surface_does_not_read_is_415(
    server: Server, api: httpx.Client, media_type: str
) -> None:
    """FHIR's HTTP rules: 415 for a body format the server does not support. A JSON resource sent as
    `text/plain` (or by `curl -d`, form-encoded) was stored as if it were JSON, an XML one was
    "not valid JSON" (400), and a JSON body to `_search` was read as one odd parameter name."""
    patient = b'{"resourceType": "Patient", "id": "p1"}'
    with _started(server, api) as (agent, base, _):
        headers = {"Content-Type": media_type}
        for method, path in (("POST", "/Patient"), ("PUT", "/Patient/p1"), ("PUT", "/Patient?_id=p1")):
            _outcome(agent.request(method, f"{base}{path}", content=patient, headers=headers), 415)
        _outcome(agent.post(base, content=b'{"resourceType": "Bundle"}', headers=headers), 415)
        assert ok(agent.get(f"{base}/Patient"))["total"] == 0
        searched = agent.post(f"{base}/Patient/_search", json={"name": "x"})
        assert _outcome(searched, 415)["issue"][0]["diagnostics"].endswith("not application/json")
        fine = [
            {"Content-Type": "application/fhir+json; charset=utf-8"},
            {"Content-Type": "application/json"},
            {},
        ]
        statuses = [
            agent.put(f"{base}/Patient/p1", content=patient, headers=sent).status_code for sent in fine
        ]
        assert statuses == [201, 200, 200]
        ok(agent.post(f"{base}/Patient/_search", content=b"_id=p1"))


def test_a_search_by_post_without_a_body_is_not_judged_by_its_content_type(
    server: Server, api: httpx.Client
) -> None:
    """FHIR clients often send `Content-Type: application/fhir+json` on every request; a `POST
    _search` with its parameters in the URL and no body has no format to refuse, and was a 415."""
    with _started(server, api) as (agent, base, _):
        ok(agent.put(f"{base}/Patient/p1", json={"resourceType": "Patient", "id": "p1"}), 201)
        fhir_json = {"Content-Type": "application/fhir+json"}
        found = ok(agent.post(f"{base}/Patient/_search", params={"_id": "p1"}, headers=fhir_json))
        assert [e["resource"]["id"] for e in found["entry"]] == ["p1"]


@pytest.mark.parametrize(
    "entry",
    [
        {"resource": {"resourceType": "Patient", "id": "x" * 65}},
        {"fullUrl": "urn:uuid:" + "0" * 70, "resource": {"resourceType": "Patient"}},
        {"resource": {"resourceType": "P" * 65, "id": "p1"}},
    ],
    ids=["long-id", "long-urn-uuid", "long-type"],
)
def test_a_dataset_the_store_cannot_hold_fails_the_start(
    server: Server, api: httpx.Client, entry: Json
) -> None:
    """SPEC §1.1: a task run is `failed` when provisioning fails, and start returns 409 with the
    reason. A resource id or type over the store's 64 characters (FHIR ids are 1-64) made start
    answer 422 "a value is too large" on PostgreSQL with the task run left `created` (every retry
    the same), and loaded on SQLite."""
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [entry]}
    started = _start_with_dataset(server, api, "fhir", bundle)
    reason = error(started.response, 409, "CONFLICT")["reason"]
    assert "longer than 64 characters" in reason and started.dataset_id not in reason
    assert ok(api.get(f"/task-runs/{started.run.task_runs[0]['id']}"))["status"] == "failed"


def test_ids_that_name_no_snapshot_file_are_refused(server: Server, api: httpx.Client) -> None:
    """`.` and `..` match FHIR's id pattern, but SPEC §6 stores a resource as
    `fhir/<type>/<id>.json`: after an agent wrote `PUT Patient/%2E%2E`, `GET /task-runs/{id}/state`
    answered 500 ("unsafe path in snapshot") for that run, for good."""
    with _started(server, api) as (agent, base, task_run):
        for ident in (".", ".."):
            encoded = ident.replace(".", "%2E")
            _outcome(
                agent.put(f"{base}/Patient/{encoded}", json={"resourceType": "Patient", "id": ident}), 422
            )
        entry = {
            "resource": {"resourceType": "Patient", "id": ".."},
            "request": {"method": "PUT", "url": "Patient/.."},
        }
        bundle = {"resourceType": "Bundle", "type": "transaction", "entry": [entry]}
        _outcome(agent.post(base, json=bundle), 422)
        ok(agent.post(task_run["complete_url"]))
    assert _state_ids(api, task_run["id"]) == set()


@pytest.mark.parametrize(
    "resource",
    [
        {"resourceType": "Patient", "id": ".."},
        {"resourceType": "Patient", "id": "a/b"},
        {"resourceType": "../Patient", "id": "p1"},
    ],
    ids=["dot-dot", "slash", "type-path"],
)
def test_dataset_resources_that_name_no_snapshot_file_fail_the_start(
    server: Server, api: httpx.Client, resource: Json
) -> None:
    """Datasets keep their ids (SPEC §5.1), but one that is no file name (`..`, `a/b`) made the state
    tar.gz answer 500 or land in a folder `assay verify` does not read; start fails instead (409)."""
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": resource}]}
    reason = error(_start_with_dataset(server, api, "fhir", bundle).response, 409, "CONFLICT")["reason"]
    assert "file name" in reason


def test_a_capture_that_cannot_be_written_as_a_snapshot_is_409(server: Server, api: httpx.Client) -> None:
    """Defence for captures stored before `..` was refused: the state route answers 409 with the
    reason instead of 500. The version row is written straight into the store's tables."""
    with _started(server, api) as (agent, base, task_run):
        ok(agent.post(f"{base}/Patient", json={"resourceType": "Patient"}), 201)
        playground_id = ok(api.get(f"/task-runs/{task_run['id']}"))["playground_id"]
        with server.database.engine.begin() as conn:
            seq = conn.execute(select(FhirStoreRow.seq).where(FhirStoreRow.id == playground_id)).scalar_one()
            body = json.dumps({"resourceType": "Patient", "id": ".."})
            row = {"store_id": playground_id, "seq": seq + 1, "resource_type": "Patient", "resource_id": ".."}
            row |= {
                "version_id": "1",
                "last_updated": "2026-01-01T00:00:00.000Z",
                "deleted": False,
                "body": body,
            }
            conn.execute(insert(FhirVersion), [row])
            conn.execute(update(FhirStoreRow).where(FhirStoreRow.id == playground_id).values(seq=seq + 1))
        ok(agent.post(task_run["complete_url"]))
    refused = api.get(f"/task-runs/{task_run['id']}/state")
    error(refused, 409, "CONFLICT")
    assert "cannot be written as a snapshot" in refused.json()["error"]["message"]
