"""Conditional update and delete (FHIR R4 §3.1.0.4.3, §3.1.0.7.1) and type- and system-level
history, against a real uvicorn server with raw httpx and fhirpy: 0 matches create (update) or
do nothing (delete), 1 match is written, more than one is 412; the same in transaction and batch
bundles; `_history` lists the playground's own versions newest first, paged, with `_since`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fhirpy import SyncFHIRClient

from tests.sandboxes.conftest import FhirServer

FHIR = {"Content-Type": "application/fhir+json"}
MRN = "identifier=urn:mrn|42"
Json = dict[str, Any]


@pytest.fixture
def http(new_store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def _patient(family: str, mrn: str = "42", **extra: Any) -> Json:
    return {
        "resourceType": "Patient",
        "identifier": [{"system": "urn:mrn", "value": mrn}],
        "name": [{"family": family}],
        **extra,
    }


def test_conditional_update_creates_then_updates_then_refuses_ambiguity(http: httpx.Client) -> None:
    created = http.put(f"/Patient?{MRN}", json=_patient("First"))
    assert created.status_code == 201, created.text
    pid = created.json()["id"]
    assert created.headers["location"].endswith(f"/Patient/{pid}/_history/1")

    updated = http.put(f"/Patient?{MRN}", json=_patient("Second"))
    assert (updated.status_code, updated.json()["id"]) == (200, pid)
    assert updated.json()["meta"]["versionId"] == "2"
    assert http.get(f"/Patient/{pid}").json()["name"][0]["family"] == "Second"

    wrong_id = http.put(f"/Patient?{MRN}", json=_patient("Third", id="someone-else"))
    assert wrong_id.status_code == 400 and "someone-else" in wrong_id.json()["issue"][0]["diagnostics"]
    stale = http.put(f"/Patient?{MRN}", json=_patient("Third"), headers={"If-Match": 'W/"1"'})
    assert stale.status_code == 412

    assert http.put("/Patient/twin", json=_patient("Twin", id="twin")).status_code == 201
    ambiguous = http.put(f"/Patient?{MRN}", json=_patient("Fourth"))
    assert ambiguous.status_code == 412 and "2 Patient" in ambiguous.json()["issue"][0]["diagnostics"]

    chosen = http.put("/Patient?identifier=urn:mrn|7", json=_patient("Chosen", "7", id="chosen-id"))
    assert (chosen.status_code, chosen.json()["id"]) == (201, "chosen-id")
    assert http.put("/Patient", json=_patient("Nobody")).status_code == 400
    assert http.put("/Patient?bogus=1", json=_patient("Nobody")).status_code == 400


def test_conditional_delete_one_none_many(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient("Gone")).json()["id"]
    deleted = http.delete(f"/Patient?{MRN}")
    assert (deleted.status_code, deleted.headers["etag"]) == (204, 'W/"2"')
    assert http.get(f"/Patient/{pid}").status_code == 410
    assert http.delete(f"/Patient?{MRN}").status_code == 204  # nothing matches: no-op
    assert http.get(f"/Patient/{pid}/_history").json()["total"] == 2

    http.post("/Patient", json=_patient("A", "9"))
    http.post("/Patient", json=_patient("B", "9"))
    assert http.delete("/Patient?identifier=urn:mrn|9").status_code == 412
    assert http.get("/Patient", params={"identifier": "urn:mrn|9"}).json()["total"] == 2
    assert http.delete("/Patient").status_code == 400


def test_conditional_entries_in_transaction_and_batch(http: httpx.Client) -> None:
    kept = http.post("/Patient", json=_patient("Kept", "1")).json()["id"]
    http.post("/Patient", json=_patient("Dropped", "2"))
    transaction = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": _patient("Renamed", "1"), "request": {"method": "PUT", "url": "Patient?identifier=urn:mrn|1"}},
            {"fullUrl": "urn:uuid:new", "resource": _patient("New", "3"),
             "request": {"method": "PUT", "url": "Patient?identifier=urn:mrn|3"}},
            {"request": {"method": "DELETE", "url": "Patient?identifier=urn:mrn|2"}},
            {"request": {"method": "DELETE", "url": "Patient?identifier=urn:mrn|404"}},
            {"resource": {"resourceType": "Observation", "status": "final", "code": {"text": "x"},
                          "subject": {"reference": "urn:uuid:new"}},
             "request": {"method": "POST", "url": "Observation"}},
        ],
    }  # fmt: skip
    response = http.post("/", json=transaction)
    assert response.status_code == 200, response.text
    entries = response.json()["entry"]
    assert [e["response"]["status"] for e in entries] == ["200 OK", "201 Created", "204 No Content",
                                                          "204 No Content", "201 Created"]  # fmt: skip
    assert entries[0]["resource"]["id"] == kept
    new_id = entries[1]["resource"]["id"]
    assert entries[4]["resource"]["subject"]["reference"] == f"Patient/{new_id}"
    assert http.get("/Patient", params={"identifier": "urn:mrn|2"}).json()["total"] == 0

    http.post("/Patient", json=_patient("Twin", "1"))
    ambiguous = {**transaction, "entry": transaction["entry"][:1]}
    assert http.post("/", json=ambiguous).status_code == 412
    batch = {**transaction, "type": "batch", "entry": [*transaction["entry"][:1], transaction["entry"][3]]}
    statuses = [e["response"]["status"] for e in http.post("/", json=batch).json()["entry"]]
    assert statuses == ["412", "204 No Content"]


def test_type_and_system_history_list_the_playgrounds_versions(http: httpx.Client, new_store: str) -> None:
    client = SyncFHIRClient(new_store)
    patient = client.resource("Patient", name=[{"family": "Versioned"}])
    patient.save()
    patient["gender"] = "female"
    patient.save()
    first_write = http.get(f"/Patient/{patient.id}/_history/1").json()["meta"]["lastUpdated"]
    http.post("/Observation", json={"resourceType": "Observation", "status": "final", "code": {"text": "bp"}})
    http.delete(f"/Patient/{patient.id}")

    typed = http.get("/Patient/_history").json()
    assert (typed["type"], typed["total"]) == ("history", 3)
    assert [(e["request"]["method"], e["response"]["etag"]) for e in typed["entry"]] == [
        ("DELETE", 'W/"3"'), ("PUT", 'W/"2"'), ("POST", 'W/"1"'),
    ]  # fmt: skip
    assert "resource" not in typed["entry"][0] and typed["entry"][1]["resource"]["gender"] == "female"

    everything = http.get("/_history", params={"_count": "2"}).json()
    assert everything["total"] == 4
    assert [e["request"]["url"].split("/")[0] for e in everything["entry"]] == ["Patient", "Observation"]
    following = next(link["url"] for link in everything["link"] if link["relation"] == "next")
    rest = httpx.get(following).json()
    assert [e["response"]["etag"] for e in rest["entry"]] == ['W/"2"', 'W/"1"']
    assert not any(link["relation"] == "next" for link in rest["link"])

    since = http.get("/_history", params={"_since": "2999-01-01T00:00:00Z"}).json()
    assert (since["total"], since["entry"]) == (0, [])
    assert http.get("/_history", params={"_since": first_write}).json()["total"] == 4
    assert http.get("/_history", params={"_since": "yesterday"}).status_code == 400
    assert http.get("/_history", params={"name": "x"}).status_code == 400
    assert http.get("/Nope/_history").status_code == 404


def test_history_of_a_seeded_store_leaves_the_dataset_out(fhir_server: FhirServer) -> None:
    seed = {"resourceType": "Bundle", "type": "collection",
            "entry": [{"resource": {"resourceType": "Patient", "id": "seeded"}}]}  # fmt: skip
    fhir_server.fhir.provision("pg_seededhistory", [seed])
    base = fhir_server.base("pg_seededhistory")
    assert httpx.get(f"{base}/Patient/_history").json()["total"] == 0
    assert (
        httpx.put(f"{base}/Patient/seeded", json={"resourceType": "Patient", "id": "seeded"}).status_code
        == 200
    )
    [entry] = httpx.get(f"{base}/_history").json()["entry"]
    assert (entry["request"]["method"], entry["response"]["etag"]) == ("PUT", 'W/"2"')
    assert httpx.get(f"{base}/Patient/seeded/_history").json()["total"] == 2


def test_the_capability_statement_says_so(http: httpx.Client) -> None:
    rest = http.get("/metadata").json()["rest"][0]
    patient = next(r for r in rest["resource"] if r["type"] == "Patient")
    assert (patient["conditionalUpdate"], patient["conditionalDelete"]) == (True, "single")
    assert {"code": "history-type"} in patient["interaction"]
    assert {"code": "history-system"} in rest["interaction"]
    assert "strict_validation" in rest["documentation"]
