"""Compartment search and operations (issue 15, items 3 and 8): `Patient/[id]/[type]`,
`Patient/[id]/$everything`, `Observation/$lastn`, `[type]/$validate`. Each test: the request, what
R4 says, the assertion; against a real uvicorn server on SQLite and (with ASSAY_TEST_POSTGRES_URL)
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

FHIR = {"Content-Type": "application/fhir+json"}
LOINC = "http://loinc.org"


@dataclass
class Chart:
    http: httpx.Client
    patient: str
    other: str
    practitioner: str
    condition: str
    observations: list[str]


def _create(http: httpx.Client, resource: dict[str, object]) -> str:
    created = http.post(f"/{resource['resourceType']}", json=resource)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _observation(
    patient: str, code: str, when: str, value: float, performer: str | None = None
) -> dict[str, object]:
    observation: dict[str, object] = {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": LOINC, "code": code}]},
        "subject": {"reference": f"Patient/{patient}"},
        "effectiveDateTime": when,
        "valueQuantity": {"value": value, "unit": "mmHg"},
    }
    if performer:
        observation["performer"] = [{"reference": f"Practitioner/{performer}"}]
    return observation


@pytest.fixture
def chart(new_store: str) -> Iterator[Chart]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as http:
        practitioner = _create(http, {"resourceType": "Practitioner", "name": [{"family": "Rivera"}]})
        patient = _create(http, {"resourceType": "Patient", "name": [{"family": "Smith"}]})
        other = _create(http, {"resourceType": "Patient", "name": [{"family": "Jones"}]})
        condition = _create(http, {
            "resourceType": "Condition", "subject": {"reference": f"Patient/{patient}"},
            "code": {"text": "Diabetes"},
        })  # fmt: skip
        _create(
            http,
            {
                "resourceType": "Condition",
                "subject": {"reference": f"Patient/{other}"},
                "code": {"text": "Asthma"},
            },
        )
        observations = [
            _create(http, _observation(patient, "8480-6", "2026-01-01T10:00:00Z", 150, practitioner)),
            _create(http, _observation(patient, "8480-6", "2026-03-01T10:00:00Z", 140)),
            _create(http, _observation(patient, "8462-4", "2026-02-01T10:00:00Z", 90)),
            _create(http, _observation(other, "8480-6", "2026-04-01T10:00:00Z", 120)),
        ]
        yield Chart(http, patient, other, practitioner, condition, observations)


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(e["resource"]["id"] for e in response.json().get("entry", []))


def test_compartment_search(chart: Chart) -> None:
    """search.html §3.1.1.1.1: `GET Patient/[id]/Condition` searches the Conditions in that
    patient's compartment; other parameters still apply."""
    assert _ids(chart.http.get(f"/Patient/{chart.patient}/Condition")) == [chart.condition]
    found = chart.http.get(f"/Patient/{chart.patient}/Observation", params={"code": f"{LOINC}|8480-6"})
    assert _ids(found) == sorted(chart.observations[:2])
    assert chart.http.get(f"/Patient/{chart.patient}/Observation").json()["total"] == 3


def test_compartment_errors(chart: Chart) -> None:
    """An unknown patient is 404; a type never in the Patient compartment is 400."""
    assert chart.http.get("/Patient/nobody/Condition").status_code == 404
    assert chart.http.get(f"/Patient/{chart.patient}/Organization").status_code == 400


def test_everything(chart: Chart) -> None:
    """patient-operation-everything.html: the patient, everything in its compartment, and the
    resources those refer to (here the performing Practitioner); nothing of another patient."""
    response = chart.http.get(f"/Patient/{chart.patient}/$everything")
    bundle = response.json()
    assert response.status_code == 200 and bundle["type"] == "searchset"
    keys = {(e["resource"]["resourceType"], e["resource"]["id"]) for e in bundle["entry"]}
    assert keys == {
        ("Patient", chart.patient), ("Condition", chart.condition), ("Practitioner", chart.practitioner),
        *(("Observation", oid) for oid in chart.observations[:3]),
    }  # fmt: skip
    assert bundle["total"] == 6


def test_everything_pages_and_filters_by_type(chart: Chart) -> None:
    """`_count` pages the result with `next` links; `_type` keeps the listed types."""
    first = chart.http.get(f"/Patient/{chart.patient}/$everything", params={"_count": 4}).json()
    assert len(first["entry"]) == 4
    next_url = next(link["url"] for link in first["link"] if link["relation"] == "next")
    second = httpx.get(next_url, headers=FHIR, timeout=30).json()
    assert len(second["entry"]) == 2
    typed = chart.http.get(f"/Patient/{chart.patient}/$everything", params={"_type": "Condition,Patient"})
    assert {e["resource"]["resourceType"] for e in typed.json()["entry"]} == {"Condition", "Patient"}


def test_lastn(chart: Chart) -> None:
    """observation-operation-lastn.html: per code, the `max` most recent Observations."""
    latest = chart.http.get("/Observation/$lastn", params={"patient": chart.patient})
    assert _ids(latest) == sorted([chart.observations[1], chart.observations[2]])
    two = chart.http.get("/Observation/$lastn", params={"patient": chart.patient, "max": "2"})
    assert _ids(two) == sorted(chart.observations[:3])


def test_validate(chart: Chart) -> None:
    """resource-operation-validate.html: the resource checked as a write would be; the answer is
    an OperationOutcome (200) listing the errors, or saying it is valid."""
    bad = chart.http.post("/Patient/$validate", json={"resourceType": "Patient", "birthDate": "1970-13-45"})
    assert bad.status_code == 200
    assert bad.json()["issue"][0]["expression"] == ["Patient.birthDate"]
    good = chart.http.post("/Patient/$validate", json={
        "resourceType": "Parameters", "parameter": [{"name": "resource", "resource": {"resourceType": "Patient"}}],
    })  # fmt: skip
    assert good.json()["issue"][0]["severity"] == "information"
    assert chart.http.get("/Patient", params={"_count": 0}).json()["total"] == 2  # nothing written
