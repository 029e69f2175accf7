"""Builders for catalog objects over the HTTP API, and assertions used by several test modules.

The stores of a playground are empty until the sandbox surfaces land, which is still enough for
meaningful pass/fail mixes: on an empty transcript `not_contains` holds and `contains` does not,
and an assertion type nobody knows (inserted straight into the table, as one stored before a
schema change) is an unsupported failure.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from assay.store import new_id, utcnow
from assay.store.models import ApiKey, Criterion
from assay.store.tokens import hash_token

from .conftest import Server

Json = dict[str, Any]

PASSES = {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["social security number"]}
FAILS = {"assert": "voice-transcript", "speaker": "agent", "contains": ["member ID", "date of birth"]}
FHIR_BOOKED = {
    "assert": "fhir-resource-state",
    "resource_type": "Appointment",
    "search": {"patient": "Patient/john-smith", "status": "booked"},
    "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
}

NOTE_WRITTEN = {
    "assert": "fhir-resource-state",
    "resource_type": "Observation",
    "search": {"patient": "Patient/p1", "code": "note"},
}
"""Passes once the agent has written an Observation coded `note` about Patient/p1."""


def one_patient_bundle(family: str) -> Json:
    """A FHIR dataset holding Patient/p1 only."""
    patient = {"resourceType": "Patient", "id": "p1", "name": [{"family": family}]}
    return {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": patient}]}


ALICE_AND_BOB = {
    "resourceType": "Bundle",
    "type": "collection",
    "entry": [
        {"resource": {"resourceType": "Patient", "id": "alice", "name": [{"family": "Adams"}]}},
        {"resource": {"resourceType": "Patient", "id": "bob", "name": [{"family": "Brown"}]}},
    ],
}
"""A clinic of two patients: the task is about alice, and an edit to bob is the wrong patient."""


def book_alice(fhir: httpx.Client, base: str, *, edit_bob: bool = False) -> None:
    """Play the agent on FHIR REST: book alice an appointment and, with `edit_bob`, also edit bob."""
    appointment = {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [{"actor": {"reference": "Patient/alice"}, "status": "accepted"}],
    }
    headers = {"content-type": "application/fhir+json"}
    created = fhir.post(f"{base}/Appointment", content=json.dumps(appointment), headers=headers)
    assert created.status_code == 201, created.text
    if edit_bob:
        bob = ok(fhir.get(f"{base}/Patient/bob"))
        bob["name"] = [{"family": "Brown-Edited"}]
        edited = fhir.put(f"{base}/Patient/bob", content=json.dumps(bob), headers=headers)
        assert edited.status_code == 200, edited.text


def unique(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:8]}"


def ok(response: httpx.Response, status: int = 200) -> Json:
    assert response.status_code == status, response.text
    body: Json = response.json()
    return body


def error(response: httpx.Response, status: int, code: str) -> Json:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    details: Json = body["error"]["details"]
    return details


@dataclass
class Catalog:
    benchmark_id: str
    task_ids: list[str]
    criteria: list[Json]


def make_benchmark(
    api: httpx.Client,
    tasks: list[list[Json]],
    *,
    timeout: int | None = None,
    concurrency: int | None = None,
) -> Catalog:
    """A benchmark with one task per entry of `tasks`, each with those criteria bodies."""
    body: Json = {"name": unique("bench")}
    if timeout:
        body["timeout"] = timeout
    if concurrency:
        body["concurrency"] = concurrency
    benchmark = ok(api.post("/benchmarks", json=body), 201)
    task_ids, criteria = [], []
    for i, task_criteria in enumerate(tasks):
        task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": f"task {i}"}), 201)
        task_ids.append(task["id"])
        for criterion in task_criteria:
            criteria.append(ok(api.post("/criteria", json={"task_id": task["id"], **criterion}), 201))
    return Catalog(benchmark["id"], task_ids, criteria)


def make_dataset(api: httpx.Client, kind: str, data: Json, *entities: Json) -> Json:
    """A dataset of `kind` with `data` and these entities (201), as the API returned it."""
    body = {"name": unique(kind), "type": kind, "data": data, "entities": list(entities)}
    return ok(api.post("/datasets", json=body), 201)


def criterion(assertion: Json, weight: float = 1, axis: str | None = None, label: str | None = None) -> Json:
    return {"label": label or assertion["assert"], "assertion": assertion, "weight": weight, "axis": axis}


def org_id_of(server: Server, key: str) -> str:
    with server.database.transaction() as session:
        row = session.query(ApiKey).filter(ApiKey.token_hash == hash_token(key)).one()
        return row.org_id


def insert_legacy_criterion(server: Server, task_id: str, assertion: Json, weight: float = 1) -> str:
    """A criterion stored before a schema change: it bypasses create-time validation."""
    now, ident, org_id = utcnow(), new_id("crit_"), org_id_of(server, server.org_key)
    with server.database.transaction() as session:
        session.add(
            Criterion(
                id=ident,
                org_id=org_id,
                task_id=task_id,
                label="legacy",
                assertion=assertion,
                weight=weight,
                axis=None,
                input_entity_id=None,
                created_at=now,
                updated_at=now,
            )
        )
    return ident


@dataclass
class Run:
    id: str
    token: str
    task_runs: list[Json]
    created: Json


def start_run(api: httpx.Client, benchmark_id: str, *, scored: bool = False) -> Run:
    created = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id, "scored": scored}), 201)
    return Run(created["benchmark_run_id"], created["bearer_token"], created["task_runs"], created)


def catalog_of_every_kind(api: httpx.Client, bundle: Json) -> Json:
    """One of every catalog object (a FHIR dataset of `bundle` with an entity, an environment, a
    benchmark whose task uses both, a criterion, a solver and its key), each id under the name of
    the API's path parameter: what the schema-driven tests fill paths with."""
    dataset = ok(api.post("/datasets", json={"name": unique("st"), "type": "fhir", "data": bundle}), 201)
    entity = ok(api.post(f"/datasets/{dataset['id']}/entities", json={"kind": "patient", "data": {}}), 201)
    environment = ok(
        api.post("/environments", json={"name": unique("st"), "dataset_ids": [dataset["id"]]}), 201
    )
    catalog = make_benchmark(api, [[]])
    ok(api.patch(f"/benchmarks/{catalog.benchmark_id}", json={"environment_id": environment["id"]}))
    task_id = catalog.task_ids[0]
    ok(api.post(f"/tasks/{task_id}/entities", json={"entity_id": entity["id"]}), 201)
    assertion = {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["x"]}
    criterion = ok(
        api.post("/criteria", json={"task_id": task_id, "label": "c", "assertion": assertion}), 201
    )
    solver = ok(api.post("/solvers", json={"name": unique("st")}), 201)
    solver_key = ok(api.post(f"/solvers/{solver['id']}/api-keys", json={}), 201)
    return {
        "dataset_id": dataset["id"],
        "entity_id": entity["id"],
        "environment_id": environment["id"],
        "benchmark_id": catalog.benchmark_id,
        "task_id": task_id,
        "criterion_id": criterion["id"],
        "solver_id": solver["id"],
        "key_id": solver_key["id"],
    }
