"""The CapabilityStatement says exactly what works (issue 15): every claim in `GET metadata` is
replayed against the code or a live server, so the statement and the server cannot drift."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from assay.formats.fhir import UnknownSearchParameter, parse_search
from assay.formats.fhir._composites import COMPOSITES
from assay.formats.fhir.compartments import COMPARTMENTS
from assay.sandboxes.fhir import searching
from assay.sandboxes.fhir.capability import capability_statement
from assay.sandboxes.fhir.operations import OPERATIONS

FHIR = {"Content-Type": "application/fhir+json"}
SAMPLES = {
    "token": "x", "string": "x", "date": "2020", "number": "1", "quantity": "1",
    "uri": "http://x", "reference": "Patient/1",
}  # fmt: skip


def _sample(kind: str, code: str, parameter_type: str) -> str:
    if parameter_type == "composite":
        _, components = COMPOSITES[kind][code]
        return "$".join(SAMPLES[component_type] for _, component_type, _ in components)
    return SAMPLES[parameter_type]


@pytest.fixture(scope="module")
def statement() -> dict[str, Any]:
    return capability_statement("http://assay.invalid/fhir")


@pytest.fixture
def http(new_store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def test_every_claimed_search_parameter_parses(statement: dict[str, Any]) -> None:
    for resource in statement["rest"][0]["resource"]:
        kind = resource["type"]
        for param in resource["searchParam"]:
            try:
                parse_search(kind, {param["name"]: _sample(kind, param["name"], param["type"])})
            except UnknownSearchParameter:
                pytest.fail(f"{kind}?{param['name']} is claimed but refused")


def test_every_claimed_include_and_revinclude_parses(statement: dict[str, Any]) -> None:
    for resource in statement["rest"][0]["resource"]:
        for spec in resource["searchInclude"]:
            searching.parse_include(spec, "_include", False)
        for spec in resource["searchRevInclude"]:
            include = searching.parse_include(spec, "_revinclude", False)
            assert include.source is not None and include.code is not None


def test_revinclude_is_claimed_where_it_works(statement: dict[str, Any]) -> None:
    patient = next(r for r in statement["rest"][0]["resource"] if r["type"] == "Patient")
    assert {"Observation:subject", "Condition:patient", "Encounter:patient"} <= set(
        patient["searchRevInclude"]
    )


def test_the_live_server_answers_the_claims(statement: dict[str, Any], http: httpx.Client) -> None:
    """The statement the server serves is this one; the claimed parameters of the types agents use
    are searchable over HTTP, and every claimed operation is routed (not 404/405)."""
    served = http.get("/metadata").json()
    assert served["rest"][0]["resource"] == statement["rest"][0]["resource"]
    pid = http.post("/Patient", json={"resourceType": "Patient"}).json()["id"]
    for resource in statement["rest"][0]["resource"]:
        if resource["type"] not in ("Patient", "Observation", "Condition", "Encounter", "Appointment"):
            continue
        for param in resource["searchParam"]:
            value = _sample(resource["type"], param["name"], param["type"])
            response = http.get(f"/{resource['type']}", params={param["name"]: value})
            assert response.status_code == 200, (resource["type"], param["name"], response.text)
    for name, (types, level, _) in OPERATIONS.items():
        # the route is one per operation; a sample of its types, an R4-only one (no R4B model) too
        for kind in sorted(types & {"Patient", "Observation", "RiskEvidenceSynthesis"}):
            path = f"/{kind}/{pid}/${name}" if level == "instance" else f"/{kind}/${name}"
            method = "POST" if name == "validate" else "GET"
            body = {"resourceType": kind} if method == "POST" else None
            response = http.request(method, path, json=body)
            assert response.status_code == 200, (path, response.text)


def test_every_claimed_compartment_is_searchable(statement: dict[str, Any], http: httpx.Client) -> None:
    """`rest.compartment` lists R4's CompartmentDefinitions this server searches; for each, every
    member type (from the same table) answers `[Compartment]/[id]/[type]` for an existing owner, and
    a type outside it is refused."""
    claimed = statement["rest"][0]["compartment"]
    assert claimed == [
        f"http://hl7.org/fhir/CompartmentDefinition/{name}"
        for name in ("patient", "encounter", "relatedPerson", "practitioner", "device")
    ]
    owners = {
        "Patient": {"resourceType": "Patient"},
        "Encounter": {"resourceType": "Encounter", "status": "planned", "class": {"code": "AMB"}},
        "RelatedPerson": {"resourceType": "RelatedPerson", "patient": {"reference": "Patient/x"}},
        "Practitioner": {"resourceType": "Practitioner"},
        "Device": {"resourceType": "Device"},
    }
    for code, members in COMPARTMENTS.items():
        owner = http.post(f"/{code}", json=owners[code])
        assert owner.status_code == 201, owner.text
        for kind in members:
            response = http.get(f"/{code}/{owner.json()['id']}/{kind}")
            assert response.status_code == 200, (code, kind, response.text)
        assert http.get(f"/{code}/{owner.json()['id']}/CodeSystem").status_code == 400
