"""Inputs that API fuzzing (schemathesis and hand-picked hostile bodies) turned into a 500.

Each test is one finding, over real HTTP: bad input gets a precise 4xx — the SPEC §5 envelope on the
internal API, an OperationOutcome on the FHIR sandbox (SPEC §5.2) — and the server keeps serving.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.service.builders import error, make_benchmark, ok, start_run
from tests.service.conftest import Server, serving


@dataclass
class Fhir:
    client: httpx.Client
    base: str


@pytest.fixture
def fhir(api: httpx.Client, server: Server) -> Iterator[Fhir]:
    """A started task run's FHIR base, with its run token."""
    catalog = make_benchmark(api, [[]])
    run = start_run(api, catalog.benchmark_id)
    task_run_id = run.task_runs[0]["id"]
    with server.client(run.token) as client:
        ok(client.post(f"/v1/task-runs/{task_run_id}/start"))
        base = f"/v1/task-runs/{task_run_id}/fhir"
        ok(client.put(f"{base}/Patient/p1", json={"resourceType": "Patient", "id": "p1"}), 201)
        yield Fhir(client, base)


@pytest.fixture
def lenient_fhir(server: Server) -> Iterator[Fhir]:
    """`fhir`, on a playground started by a server with `lenient` FHIR (`ASSAY_FHIR_LENIENT=1`:
    writes checked structurally only), then served by the shared one (recorded at start)."""
    with serving(server, surface_settings={"fhir": {"lenient": True}}) as lenient, lenient.client() as api:
        catalog = make_benchmark(api, [[]])
        run = start_run(api, catalog.benchmark_id)
        task_run_id = run.task_runs[0]["id"]
        with lenient.client(run.token) as client:
            ok(client.post(f"/v1/task-runs/{task_run_id}/start"))
    with server.client(run.token) as client:
        yield Fhir(client, f"/v1/task-runs/{task_run_id}/fhir")


def outcome(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["resourceType"] == "OperationOutcome", body
    diagnostics: str = body["issue"][0]["diagnostics"]
    return diagnostics


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def transaction(request: dict[str, object]) -> dict[str, object]:
    entry = {
        "request": {"method": "POST", "url": "Patient", **request},
        "resource": {"resourceType": "Patient"},
    }
    return {"resourceType": "Bundle", "type": "transaction", "entry": [entry]}


@pytest.mark.parametrize("key", ["ifNoneExist", "ifMatch"])
def test_transaction_entry_with_a_non_string_condition_is_400(fhir: Fhir, key: str) -> None:
    """`request.ifNoneExist: 5` reached `parse_qsl`, `request.ifMatch: 5` the ETag regex: TypeError."""
    diagnostics = outcome(fhir.client.post(fhir.base, json=transaction({key: 5})), 400)
    assert key in diagnostics


@pytest.mark.parametrize("depth", [5000, 900])
@pytest.mark.parametrize("route", ["create", "update", "transaction", "patch"])
def test_deeply_nested_fhir_body_is_400(fhir: Fhir, route: str, depth: int) -> None:
    """Past ~1000 levels `json.loads` raised RecursionError; at 700-900 it parsed, and copying,
    reference rewriting or JSON Patch recursed instead. Both were 500s (and a dropped connection)."""
    value = nested(depth)
    resource = '{"resourceType": "Patient", "extension": ' + value + "}"
    bodies = {
        "create": ("POST", f"{fhir.base}/Patient", resource, "application/fhir+json"),
        "update": ("PUT", f"{fhir.base}/Patient/p1", resource, "application/fhir+json"),
        "transaction": (
            "POST",
            fhir.base,
            '{"resourceType": "Bundle", "type": "transaction", "entry": [{"request": {"method": "POST",'
            ' "url": "Patient"}, "resource": ' + resource + "}]}",
            "application/fhir+json",
        ),
        "patch": (
            "PATCH",
            f"{fhir.base}/Patient/p1",
            '[{"op": "add", "path": "/extension", "value": ' + value + "}]",
            "application/json-patch+json",
        ),
    }
    method, url, body, media_type = bodies[route]
    response = fhir.client.request(method, url, content=body, headers={"Content-Type": media_type})
    assert "nested" in outcome(response, 400)
    ok(fhir.client.get(f"{fhir.base}/Patient/p1"))


@pytest.mark.parametrize(
    ("path", "template"),
    [
        ("/datasets", '{"name": "deep", "type": "voice", "data": {"turns": %s}}'),
        ("/environments", '{"name": "deep", "dataset_ids": [], "settings": {"x": %s}}'),
        ("/tasks", '{"benchmark_id": "%(benchmark_id)s", "name": "deep", "task_item": {"x": %s}}'),
        ("/benchmark-runs", '{"benchmark_id": "%(benchmark_id)s", "agent": {"x": %s}}'),
        ("/v1/benchmark-runs", '{"benchmark_id": "%(benchmark_id)s", "agent": {"x": %s}}'),
    ],
)
def test_deeply_nested_internal_body_is_400(api: httpx.Client, path: str, template: str) -> None:
    """At 700-900 levels the body parsed and was stored, then serializing the response recursed:
    a 500 (or a dropped connection) for a row that could never be read back."""
    benchmark_id = make_benchmark(api, []).benchmark_id
    body = template.replace("%(benchmark_id)s", benchmark_id) % nested(900)
    response = api.post(path, content=body, headers={"Content-Type": "application/json"})
    details = error(response, 400, "BAD_REQUEST")
    assert "nested" in response.json()["error"]["message"], details
    ok(api.get("/benchmarks", params={"limit": 1}))


@pytest.mark.parametrize(
    ("element", "query"),
    [
        ({"code": {"coding": 5}}, {"code": "x"}),
        ({"code": {"coding": [5]}}, {"code": "x"}),
        ({"effectiveTiming": {"event": 5}}, {"date": "gt2000"}),
        ({"effectiveTiming": {"repeat": 5}}, {"date": "gt2000"}),
        ({"effectiveTiming": {"repeat": {"boundsPeriod": 5}}}, {"date": "gt2000"}),
        ({"totalNet": {"low": 5}}, {"totalnet": "1"}),
    ],
)
def test_search_over_a_resource_with_malformed_elements_is_200(
    lenient_fhir: Fhir, element: dict[str, object], query: dict[str, str]
) -> None:
    """A lenient playground keeps what it is given (`ASSAY_FHIR_LENIENT`); indexing a `CodeableConcept.coding` or a
    `Timing.event` that is not a list, a `Timing.repeat` or a Range's `low` that is not an object,
    raised while building the search index: every later search of that type was a 500."""
    kind = "Invoice" if "totalNet" in element else "Observation"
    resource = {
        "resourceType": kind,
        "id": "odd",
        "status": "final" if kind == "Observation" else "draft",
        **element,
    }
    fhir = lenient_fhir
    assert fhir.client.put(f"{fhir.base}/{kind}/odd", json=resource).status_code in (200, 201)
    bundle = ok(fhir.client.get(f"{fhir.base}/{kind}", params=query))
    assert bundle["resourceType"] == "Bundle" and bundle["total"] == 0
