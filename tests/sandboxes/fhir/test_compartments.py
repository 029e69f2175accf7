"""Compartment search in R4's five compartments (issue 15): `GET [Compartment]/[id]/[type]`.

R4 search.html §3.1.1.1.1: "GET [base]/Patient/[id]/[type]?parameter(s)" — "the search is
restricted to the resources in the compartment"; compartmentdefinition.html defines the Patient,
Encounter, RelatedPerson, Practitioner and Device compartments, each listing per resource type the
search parameters that put a resource in it (`{def}`: the compartment's own resource). Each test:
the request, what R4 says, the assertion; on an `assay fhir-server` store and through a started
task run's run token, on SQLite and (with ASSAY_TEST_POSTGRES_URL) PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest

LOINC = "http://loinc.org"
AMB = {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"}


@dataclass
class Care:
    http: httpx.Client
    patient: str
    doctor: str
    relative: str
    device: str
    visit: str
    other_visit: str
    by_doctor: str
    by_relative: str
    of_device: str
    condition: str


def _create(http: httpx.Client, resource: dict[str, object]) -> str:
    created = http.post(f"/{resource['resourceType']}", json=resource)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _ref(kind: str, rid: str) -> dict[str, str]:
    return {"reference": f"{kind}/{rid}"}


def _observation(code: str, **elements: object) -> dict[str, object]:
    return {
        "resourceType": "Observation", "status": "final",
        "code": {"coding": [{"system": LOINC, "code": code}]}, **elements,
    }  # fmt: skip


@pytest.fixture(scope="module")
def care(agent_fhir: httpx.Client) -> Care:
    http = agent_fhir
    doctor = _create(http, {"resourceType": "Practitioner", "name": [{"family": "Rivera"}]})
    device = _create(http, {"resourceType": "Device", "manufacturer": "Acme"})
    patient = _create(http, {
        "resourceType": "Patient", "name": [{"family": "Smith"}],
        "generalPractitioner": [_ref("Practitioner", doctor)],
    })  # fmt: skip
    relative = _create(http, {"resourceType": "RelatedPerson", "patient": _ref("Patient", patient)})
    visit = _create(http, {
        "resourceType": "Encounter", "status": "finished", "class": AMB, "subject": _ref("Patient", patient),
        "participant": [{"individual": _ref("Practitioner", doctor)}, {"individual": _ref("RelatedPerson", relative)}],
    })  # fmt: skip
    other_visit = _create(http, {
        "resourceType": "Encounter", "status": "finished", "class": AMB, "subject": _ref("Patient", patient),
    })  # fmt: skip
    by_doctor = _create(http, _observation(
        "8480-6", subject=_ref("Patient", patient), encounter=_ref("Encounter", visit),
        performer=[_ref("Practitioner", doctor)],
    ))  # fmt: skip
    by_relative = _create(http, _observation(
        "8462-4", subject=_ref("Patient", patient), encounter=_ref("Encounter", other_visit),
        performer=[_ref("RelatedPerson", relative)], device=_ref("Device", device),
    ))  # fmt: skip
    of_device = _create(http, _observation("29463-7", subject=_ref("Device", device)))
    condition = _create(http, {
        "resourceType": "Condition", "subject": _ref("Patient", patient), "encounter": _ref("Encounter", visit),
        "asserter": _ref("Practitioner", doctor), "code": {"text": "Diabetes"},
    })  # fmt: skip
    return Care(
        http,
        patient,
        doctor,
        relative,
        device,
        visit,
        other_visit,
        by_doctor,
        by_relative,
        of_device,
        condition,
    )


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    bundle = response.json()
    assert bundle["resourceType"] == "Bundle" and bundle["type"] == "searchset"
    return sorted(e["resource"]["id"] for e in bundle.get("entry", []))


def test_encounter_compartment(care: Care) -> None:
    """compartmentdefinition-encounter: Observation and Condition are in it by `encounter`; the
    Encounter itself by `{def}` (only that one); other parameters still narrow the search."""
    http = care.http
    assert _ids(http.get(f"/Encounter/{care.visit}/Observation")) == [care.by_doctor]
    assert _ids(http.get(f"/Encounter/{care.other_visit}/Observation")) == [care.by_relative]
    assert _ids(http.get(f"/Encounter/{care.visit}/Observation", params={"code": f"{LOINC}|8462-4"})) == []
    assert _ids(http.get(f"/Encounter/{care.visit}/Condition")) == [care.condition]
    assert _ids(http.get(f"/Encounter/{care.visit}/Encounter")) == [care.visit]


def test_practitioner_compartment(care: Care) -> None:
    """compartmentdefinition-practitioner: Encounter by `practitioner`/`participant`, Observation by
    `performer`, Condition by `asserter`, Patient by `general-practitioner`, itself by `{def}`."""
    http = care.http
    assert _ids(http.get(f"/Practitioner/{care.doctor}/Encounter")) == [care.visit]
    assert _ids(http.get(f"/Practitioner/{care.doctor}/Observation")) == [care.by_doctor]
    assert _ids(http.get(f"/Practitioner/{care.doctor}/Condition")) == [care.condition]
    assert _ids(http.get(f"/Practitioner/{care.doctor}/Patient")) == [care.patient]
    assert _ids(http.get(f"/Practitioner/{care.doctor}/Practitioner")) == [care.doctor]


def test_related_person_compartment(care: Care) -> None:
    """compartmentdefinition-relatedperson: Encounter by `participant`, Observation by `performer`."""
    http = care.http
    assert _ids(http.get(f"/RelatedPerson/{care.relative}/Encounter")) == [care.visit]
    assert _ids(http.get(f"/RelatedPerson/{care.relative}/Observation")) == [care.by_relative]
    assert _ids(http.get(f"/RelatedPerson/{care.relative}/RelatedPerson")) == [care.relative]


def test_device_compartment(care: Care) -> None:
    """compartmentdefinition-device: Observation by `subject` or `device`; R4 lists Device itself
    as never in the Device compartment, so `Device/[id]/Device` is refused."""
    http = care.http
    assert _ids(http.get(f"/Device/{care.device}/Observation")) == sorted([care.by_relative, care.of_device])
    assert http.get(f"/Device/{care.device}/Device").status_code == 400


def test_patient_compartment_still_works(care: Care) -> None:
    assert _ids(care.http.get(f"/Patient/{care.patient}/Encounter")) == sorted([care.visit, care.other_visit])


def test_refusals(care: Care) -> None:
    """A type never in the compartment and a type that is no compartment are 400 with an
    OperationOutcome; an unknown owner is 404 (HAPI)."""
    http = care.http
    for path, status in (
        (f"/Encounter/{care.visit}/Patient", 400),
        (f"/Organization/{care.doctor}/Patient", 400),
        ("/Encounter/nobody/Observation", 404),
        ("/Practitioner/nobody/Encounter", 404),
    ):
        response = http.get(path)
        assert response.status_code == status, (path, response.text)
        assert response.json()["resourceType"] == "OperationOutcome"
