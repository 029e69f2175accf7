"""`/openapi.json` teaches the assertion shapes: `assertion` is a union discriminated by `assert`
(so `/docs` renders each shape), while the service still validates through `parse_assertion`."""

from __future__ import annotations

import httpx

from assay.core.assertions import ASSERTION_MODELS

from .builders import error, ok, unique
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


def test_unknown_assertion_type_is_still_a_precise_422(api: httpx.Client) -> None:
    benchmark = ok(api.post("/benchmarks", json={"name": unique("openapi")}), 201)
    task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
    body = {"task_id": task["id"], "label": "x", "assertion": {"assert": "telepathy"}}
    details = error(api.post("/criteria", json=body), 422, "VALIDATION_ERROR")
    assert list(details) == ["assertion.assert"]


def test_healthz_needs_no_token(server: Server) -> None:
    answer = httpx.get(f"{server.url}/healthz")
    assert answer.status_code == 200 and answer.json()["status"] == "ok"
