"""`/openapi.json` teaches the assertion shapes: `assertion` is a union discriminated by `assert`
(so `/docs` renders each shape), while the service still validates through `parse_assertion`; and
every operation documents its success and error answers with their content types (issue 9)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx

from assay.core.assertions import ASSERTION_MODELS
from assay.core.assertions.examples import EXAMPLES
from assay.service.app import create_app
from assay.service.settings import Settings

from .builders import error, make_benchmark, ok, start_run, unique
from .conftest import Server


def test_assertion_is_a_discriminated_union(api: httpx.Client) -> None:
    document = ok(api.get("/openapi.json"))
    schemas = document["components"]["schemas"]
    union = schemas["CriterionCreate"]["properties"]["assertion"]
    assert union["discriminator"]["propertyName"] == "assert"
    assert set(union["discriminator"]["mapping"]) == set(ASSERTION_MODELS)
    assert len(union["oneOf"]) == len(ASSERTION_MODELS)
    for ref in union["discriminator"]["mapping"].values():
        assert ref.rsplit("/", 1)[1] in schemas, ref
    fhir = schemas["FhirResourceState"]
    assert fhir["properties"]["assert"]["const"] == "fhir-resource-state"
    assert {"resource_type", "search", "fields"} <= set(fhir["properties"])
    patch = schemas["CriterionPatch"]["properties"]["assertion"]
    assert {"type": "null"} in patch["anyOf"]
    assert schemas["CriterionOut"]["properties"]["assertion"]["discriminator"]["propertyName"] == "assert"


def test_each_assertion_shape_carries_the_examples_the_reference_runs(api: httpx.Client) -> None:
    schemas = ok(api.get("/openapi.json"))["components"]["schemas"]
    for tag, model in ASSERTION_MODELS.items():
        assert schemas[model.__name__]["examples"] == list(EXAMPLES[tag]), tag
    x12_path = schemas["X12Field"]["properties"]["path"]["description"]
    assert "2110C/EB[#1]01" in x12_path


def test_unknown_assertion_type_is_still_a_precise_422(api: httpx.Client) -> None:
    benchmark = ok(api.post("/benchmarks", json={"name": unique("openapi")}), 201)
    task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
    body = {"task_id": task["id"], "label": "x", "assertion": {"assert": "telepathy"}}
    details = error(api.post("/criteria", json=body), 422, "VALIDATION_ERROR")
    assert list(details) == ["assertion.assert"]


def test_healthz_needs_no_token(server: Server) -> None:
    answer = httpx.get(f"{server.url}/healthz")
    assert answer.status_code == 200 and answer.json()["status"] == "ok"


FHIR_TYPES = {"application/fhir+json", "application/json"}
ENVELOPE = "#/components/schemas/ErrorEnvelope"
OUTCOME = "#/components/schemas/OperationOutcome"
TOKEN_ERRORS = {"401", "403", "429", "503"}
"""Every operation behind a token can be refused it, rate-limited, or find the database saturated."""


@functools.cache
def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = create_app(Settings(data_dir=Path("unused"))).openapi()
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def test_every_operation_documents_its_success_and_error_answers() -> None:
    """Derived from the routers' `responses=` (so a new route cannot forget): each operation has a
    2xx whose body (unless 204) has a schema per content type, and every error it can answer with
    its content type and schema: the envelope on the API, an OperationOutcome in both FHIR media
    types on the FHIR surface, `Retry-After` with 429 and 503."""
    operations = _operations()
    assert len(operations) > 100
    problems: list[str] = []
    for method, path, operation in operations:
        where = f"{method} {path}"
        responses: dict[str, Any] = operation["responses"]
        successes = {code: answer for code, answer in responses.items() if code.startswith("2")}
        if not successes:
            problems.append(f"{where}: no success answer")
        for code, answer in successes.items():
            content = answer.get("content", {})
            if code == "204":
                if content:
                    problems.append(f"{where}: 204 with a body")
            elif not content or not all(media.get("schema") for media in content.values()):
                problems.append(f"{where}: {code} without a body schema: {content}")
        errors = {code: answer for code, answer in responses.items() if code[0] in "45"}
        expected = {"503"} if path == "/healthz" else TOKEN_ERRORS
        if not expected <= set(errors):
            problems.append(f"{where}: missing {sorted(expected - set(errors))}")
        fhir = "/fhir" in path
        for code, answer in errors.items():
            content = answer.get("content", {})
            wanted = (FHIR_TYPES, OUTCOME) if fhir else ({"application/json"}, ENVELOPE)
            refs = {media.get("schema", {}).get("$ref") for media in content.values()}
            if set(content) != wanted[0] or refs != {wanted[1]}:
                problems.append(f"{where}: {code} is {sorted(content)} {refs}, not {wanted}")
            saturated = code in ("429", "503") and path != "/healthz"  # healthz: unreachable, not busy
            if saturated and "Retry-After" not in answer.get("headers", {}):
                problems.append(f"{where}: {code} without Retry-After")
    assert not problems, "\n".join(problems)


def test_the_fhir_operations_answer_201_and_the_codes_the_issue_names() -> None:
    for method, path, operation in _operations():
        if "/fhir" not in path:
            continue
        codes = set(operation["responses"])
        assert {"400", "401", "403", "404", "409", "410", "412", "415", "422"} <= codes, path
        if method == "POST" and path.endswith("/{resource_type}"):
            assert {"200", "201"} <= codes  # create, and If-None-Exist finding one
            assert set(operation["responses"]["201"]["content"]) == FHIR_TYPES


def test_fhir_refusals_before_the_fhir_work_are_operation_outcomes(server: Server, api: httpx.Client) -> None:
    """An unknown or ended task run, or a NUL in its id, used to come back from the FHIR routes in
    the API's envelope as `application/json`; now an OperationOutcome, like every FHIR error."""
    run = start_run(api, make_benchmark(api, [[]]).benchmark_id)
    task_run = run.task_runs[0]["id"]
    with server.client(run.token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run}/start"))
        ok(agent.post(f"/v1/task-runs/{task_run}/complete"))
        for path, status, code in (
            (f"/v1/task-runs/{task_run}/fhir/metadata", 409, "conflict"),
            ("/v1/task-runs/tr_unknown/fhir/Patient", 404, "not-found"),
            ("/v1/task-runs/tr%00/fhir/Patient", 400, "invalid"),
            (f"/v1/benchmark-runs/{run.id}/fhir/Patient", 409, "conflict"),
        ):
            answer = agent.get(path)
            assert answer.status_code == status, answer.text
            assert answer.headers["content-type"] == "application/fhir+json", path
            outcome = answer.json()
            assert outcome["resourceType"] == "OperationOutcome" and outcome["issue"][0]["code"] == code
        as_json = agent.get(f"/v1/task-runs/{task_run}/fhir/metadata", headers={"Accept": "application/json"})
        assert as_json.status_code == 409 and as_json.headers["content-type"] == "application/json"
        assert as_json.json()["resourceType"] == "OperationOutcome"
