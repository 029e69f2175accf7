"""What an agent does with a FHIR EHR, through real clients written by others (issue 15): fhirpy
(beda-software; sync and async) and SMART's `fhirclient`, against a live uvicorn server seeded with
a real Synthea patient. Find the patient by name and birth date, list active conditions and recent
observations by LOINC, book an Appointment, order a ServiceRequest, update an Encounter, `_include`,
a chained search and `$everything`. On SQLite and (with ASSAY_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from fhirclient import client as smart_client
from fhirclient.models.appointment import Appointment
from fhirclient.models.condition import Condition
from fhirclient.models.encounter import Encounter
from fhirclient.models.observation import Observation
from fhirclient.models.patient import Patient
from fhirclient.models.servicerequest import ServiceRequest
from fhirpy import AsyncFHIRClient, SyncFHIRClient

from tests.conftest import FIXTURES
from tests.sandboxes.conftest import FhirServer

LIZ = FIXTURES / "fhir" / "synthea" / "smart-2019" / "Liz_Conn_27c911c6-f045-4ffa-af5d-6eba57ac94b2.json"
LIZ_ID = "ee9f8dd8-72d2-4769-8020-89e504b1504b"
HEIGHT = "http://loinc.org|8302-2"


@pytest.fixture
def seeded(fhir_server: FhirServer) -> str:
    """A store seeded with Liz Conn's Synthea bundle (loaded as a dataset is); its FHIR base."""
    store_id = "pg_" + uuid.uuid4().hex[:20]
    fhir_server.fhir.provision(store_id, [json.loads(LIZ.read_text())])
    return fhir_server.base(store_id)


def _appointment(patient_id: str) -> dict[str, object]:
    return {
        "resourceType": "Appointment",
        "status": "booked",
        "start": "2026-12-01T09:00:00Z",
        "end": "2026-12-01T09:30:00Z",
        "participant": [{"actor": {"reference": f"Patient/{patient_id}"}, "status": "accepted"}],
    }


def test_fhirpy_sync_agent_session(seeded: str) -> None:
    client = SyncFHIRClient(seeded)
    [patient] = client.resources("Patient").search(family="Conn", birthdate="1986-11-28").fetch()
    assert patient.id == LIZ_ID

    active = client.resources("Condition").search(patient=patient.id, **{"clinical-status": "active"}).fetch()
    assert [c["code"]["coding"][0]["display"] for c in active] == ["Hypertension"]
    heights = (
        client.resources("Observation").search(patient=patient.id, code=HEIGHT).sort("-date").limit(2).fetch()
    )
    assert len(heights) == 2 and heights[0]["effectiveDateTime"] >= heights[1]["effectiveDateTime"]

    appointment = client.resource("Appointment", **_appointment(patient.id))
    appointment.save()
    assert (
        client.resources("Appointment").search(patient=patient.id, status="booked").fetch_raw()["total"] == 1
    )
    order = client.resource(
        "ServiceRequest", status="active", intent="order", subject={"reference": f"Patient/{patient.id}"},
        code={"coding": [{"system": "http://loinc.org", "code": "4548-4", "display": "Hemoglobin A1c"}]},
    )  # fmt: skip
    order.save()
    assert order.id and order["meta"]["versionId"] == "1"

    encounter = client.resources("Encounter").search(patient=patient.id).sort("-date").first()
    encounter["status"] = "cancelled"
    encounter.save()
    assert client.reference("Encounter", encounter.id).to_resource()["status"] == "cancelled"

    included = (
        client.resources("Encounter").search(patient=patient.id).include("Encounter", "subject").fetch_raw()
    )
    assert {e["search"]["mode"] for e in included["entry"]} == {"match", "include"}
    chained = client.resources("Condition").search(**{"subject:Patient.name": "Conn"}).fetch()
    assert [c.id for c in chained] == [c.id for c in active]
    everything = client.execute(f"Patient/{patient.id}/$everything", method="get", params={"_count": 500})
    kinds = {e["resource"]["resourceType"] for e in everything["entry"]}
    assert {"Patient", "Condition", "Observation", "Appointment", "ServiceRequest", "Practitioner"} <= kinds


def test_fhirpy_async_agent_session(seeded: str) -> None:
    async def session() -> None:
        client = AsyncFHIRClient(seeded)
        found = await client.resources("Patient").search(name="liz", birthdate="1986-11-28").fetch()
        assert [p.id for p in found] == [LIZ_ID]
        observations = (
            await client.resources("Observation").search(subject=f"Patient/{LIZ_ID}", code=HEIGHT).fetch_all()
        )
        assert len(observations) == 3
        appointment = client.resource("Appointment", **_appointment(LIZ_ID))
        await appointment.save()
        compartment = await client.execute(f"Patient/{LIZ_ID}/Appointment", method="get")
        assert compartment["total"] == 1
        reverse = (
            await client.resources("Patient")
            .search(**{"_has:Condition:subject:code": "http://snomed.info/sct|38341003"})
            .fetch()
        )
        assert [p.id for p in reverse] == [LIZ_ID]

    asyncio.run(session())


def test_smart_fhirclient_agent_session(seeded: str) -> None:
    smart = smart_client.FHIRClient(settings={"app_id": "assay-test", "api_base": seeded + "/"})
    server = smart.server
    [patient] = Patient.where(struct={"family": "Conn", "birthdate": "1986-11-28"}).perform_resources(server)
    assert patient.id == LIZ_ID and patient.name[0].given == ["Liz"]

    conditions = Condition.where(struct={"patient": LIZ_ID, "clinical-status": "active"}).perform_resources(
        server
    )
    assert [c.code.coding[0].display for c in conditions] == ["Hypertension"]
    heights = Observation.where(
        struct={"patient": LIZ_ID, "code": HEIGHT, "_sort": "-date"}
    ).perform_resources(server)
    assert len(heights) == 3

    booked = Appointment(_appointment(LIZ_ID)).create(server)
    assert booked["status"] == "booked" and booked["id"]
    order = ServiceRequest({
        "resourceType": "ServiceRequest", "status": "active", "intent": "order",
        "subject": {"reference": f"Patient/{LIZ_ID}"}, "code": {"text": "Chest X-ray"},
    }).create(server)  # fmt: skip
    assert order["meta"]["versionId"] == "1"

    encounter = Encounter.where(struct={"patient": LIZ_ID}).perform_resources(server)[0]
    encounter.status = "entered-in-error"
    encounter.update(server)
    assert Encounter.read(encounter.id, server).status == "entered-in-error"

    chained = Observation.where(struct={"subject:Patient.family": "Conn", "code": HEIGHT}).perform_resources(
        server
    )
    assert len(chained) == 3
    everything = server.request_json(f"Patient/{LIZ_ID}/$everything?_count=500")
    assert any(e["resource"]["resourceType"] == "Appointment" for e in everything["entry"])
