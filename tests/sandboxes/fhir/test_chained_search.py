"""R4 search.html features beyond single parameters (issue 15, item 2): chained parameters,
reverse chaining (`_has`), token `:text` and `:of-type`, reference `:identifier`, composite
parameters. Each test: the request, what R4 says, the assertion; against a real uvicorn server on
SQLite and (with ASSAY_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

FHIR = {"Content-Type": "application/fhir+json"}
SNOMED = "http://snomed.info/sct"
LOINC = "http://loinc.org"
MRN = "http://hospital.example/mrn"
MR_TYPE = {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "MR"}]}


@dataclass
class World:
    http: httpx.Client
    smith: str
    jones: str
    org: str
    diabetes: str
    asthma: str


def _create(http: httpx.Client, resource: dict[str, object]) -> str:
    created = http.post(f"/{resource['resourceType']}", json=resource)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _condition(subject: str, code: str, display: str, text: str | None = None) -> dict[str, object]:
    concept: dict[str, object] = {"coding": [{"system": SNOMED, "code": code, "display": display}]}
    if text:
        concept["text"] = text
    return {"resourceType": "Condition", "subject": {"reference": f"Patient/{subject}"}, "code": concept}


def _bp(subject: str, systolic: float) -> dict[str, object]:
    return {
        "resourceType": "Observation",
        "status": "final",
        "subject": {"reference": f"Patient/{subject}"},
        "code": {"coding": [{"system": LOINC, "code": "8480-6"}]},
        "valueQuantity": {
            "value": systolic,
            "unit": "mmHg",
            "system": "http://unitsofmeasure.org",
            "code": "mm[Hg]",
        },
    }


@pytest.fixture
def world(new_store: str) -> Iterator[World]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as http:
        org = _create(http, {"resourceType": "Organization", "name": "Mercy Clinic"})
        smith = _create(http, {
            "resourceType": "Patient",
            "name": [{"family": "Smith", "given": ["Ann"]}],
            "identifier": [{"type": MR_TYPE, "system": MRN, "value": "12345"}],
            "managingOrganization": {"reference": f"Organization/{org}"},
        })  # fmt: skip
        jones = _create(http, {"resourceType": "Patient", "name": [{"family": "Jones"}]})
        diabetes = _create(http, _condition(smith, "44054006", "Diabetes mellitus type 2"))
        asthma = _create(http, _condition(jones, "195967001", "Asthma", "Childhood asthma"))
        _create(http, _bp(smith, 150))
        _create(http, _bp(jones, 110))
        _create(http, {
            "resourceType": "Encounter", "status": "finished",
            "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
            "subject": {"reference": "Patient/x", "identifier": {"system": MRN, "value": "12345"}},
        })  # fmt: skip
        yield World(http, smith, jones, org, diabetes, asthma)


def _ids(world: World, path: str, params: dict[str, str]) -> list[str]:
    response = world.http.get(path, params=params)
    assert response.status_code == 200, response.text
    return sorted(e["resource"]["id"] for e in response.json().get("entry", []))


def test_chained_parameter_with_and_without_a_type(world: World) -> None:
    """§3.1.1.4.8.1: `subject:Patient.name=smith` selects resources whose subject is a Patient named
    smith; without the type, every target type of the reference that has the parameter."""
    assert _ids(world, "/Condition", {"subject:Patient.name": "smith"}) == [world.diabetes]
    assert _ids(world, "/Condition", {"subject.name": "jones"}) == [world.asthma]
    assert _ids(world, "/Condition", {"patient.family": "nobody"}) == []


def test_chains_of_several_links(world: World) -> None:
    """§3.1.1.4.8.1: "chaining may be repeated": subject → managingOrganization → name."""
    found = _ids(world, "/Condition", {"subject:Patient.organization.name": "mercy"})
    assert found == [world.diabetes]


def test_an_unknown_chain_is_400(world: World) -> None:
    """§3.1.1.4.8.1 with http.html: a parameter the server cannot process is an error (400) unless
    the client asked for lenient handling."""
    assert world.http.get("/Condition", params={"subject.shoe-size": "9"}).status_code == 400
    assert world.http.get("/Condition", params={"code.name": "x"}).status_code == 400


def test_reverse_chaining(world: World) -> None:
    """§3.1.1.4.8.2: `_has:Condition:subject:code=…` selects Patients referred to by a Condition's
    subject whose code matches; `_has` nests."""
    assert _ids(world, "/Patient", {"_has:Condition:subject:code": f"{SNOMED}|44054006"}) == [world.smith]
    assert _ids(world, "/Patient", {"_has:Observation:patient:value-quantity": "gt140"}) == [world.smith]
    assert _ids(world, "/Patient", {"_has:Condition:subject:code:text": "asthma"}) == [world.jones]
    assert world.http.get("/Patient", params={"_has:Condition:nope:code": "x"}).status_code == 400


def test_token_text(world: World) -> None:
    """§3.1.1.4.5.4 `:text`: "the search parameter is processed as a string search against the text
    associated with the code/value" — CodeableConcept.text or Coding.display."""
    assert _ids(world, "/Condition", {"code:text": "diabetes"}) == [world.diabetes]
    assert _ids(world, "/Condition", {"code:text": "childhood"}) == [world.asthma]
    assert _ids(world, "/Condition", {"code:text": "fracture"}) == []


def test_identifier_of_type(world: World) -> None:
    """§3.1.1.4.5.5 `:of-type`: `[system]|[code]|[value]` — an Identifier whose type has the coding
    and whose value matches."""
    v2 = "http://terminology.hl7.org/CodeSystem/v2-0203"
    assert _ids(world, "/Patient", {"identifier:of-type": f"{v2}|MR|12345"}) == [world.smith]
    assert _ids(world, "/Patient", {"identifier:of-type": f"{v2}|DL|12345"}) == []
    assert world.http.get("/Patient", params={"identifier:of-type": "12345"}).status_code == 400


def test_reference_identifier(world: World) -> None:
    """§3.1.1.4.6 `:identifier`: matches `Reference.identifier` ([system|]value)."""
    found = world.http.get("/Encounter", params={"subject:identifier": f"{MRN}|12345"}).json()
    assert found["total"] == 1
    assert world.http.get("/Encounter", params={"subject:identifier": f"{MRN}|999"}).json()["total"] == 0


def test_composite_parameter(world: World) -> None:
    """§3.1.1.5.5: a composite value is its components joined by `$`; one element must match all
    of them (`code-value-quantity=http://loinc.org|8480-6$gt140`)."""
    response = world.http.get("/Observation", params={"code-value-quantity": f"{LOINC}|8480-6$gt140"})
    assert [e["resource"]["subject"]["reference"] for e in response.json()["entry"]] == [
        f"Patient/{world.smith}"
    ]
    assert (
        world.http.get("/Observation", params={"code-value-quantity": f"{LOINC}|8480-6$lt100"}).json()[
            "total"
        ]
        == 0
    )
    assert world.http.get("/Observation", params={"code-value-quantity": "8480-6"}).status_code == 400
