"""The FHIR R4 REST surface against a real uvicorn server: fhirpy as the client, raw httpx for edges.

SPEC §5.2: read, vread, history, search (GET, POST _search, paging, includes), create, conditional
create, update, JSON Patch, delete, transaction and batch bundles, ETag / If-Match, OperationOutcome
errors with their statuses.
"""

from __future__ import annotations

import httpx
import pytest
from fhirpy import SyncFHIRClient

from tests.sandboxes.conftest import at_once

FHIR = {"Content-Type": "application/fhir+json"}


@pytest.fixture
def base(new_store: str) -> str:
    return new_store


@pytest.fixture
def http(base: str) -> httpx.Client:
    with httpx.Client(base_url=base, headers=FHIR, timeout=30) as client:
        yield client


def _patient(family: str = "Smith", **extra: object) -> dict[str, object]:
    return {"resourceType": "Patient", "name": [{"family": family, "given": ["John"]}], **extra}


def test_fhirpy_books_an_appointment_and_finds_it_by_patient_and_status(base: str) -> None:
    client = SyncFHIRClient(base)
    patient = client.resource("Patient", name=[{"family": "Smith", "given": ["John"]}])
    patient.save()
    assert patient.id and patient["meta"]["versionId"] == "1"
    appointment = client.resource(
        "Appointment",
        status="booked",
        start="2026-12-01T09:00:00Z",
        end="2026-12-01T09:30:00Z",
        participant=[
            {"actor": {"reference": f"Patient/{patient.id}"}, "status": "accepted"},
            {"actor": {"display": "Dr. Rivera"}, "status": "accepted"},
        ],
    )
    appointment.save()
    client.resource("Appointment", status="proposed", participant=appointment["participant"]).save()

    found = (
        client.resources("Appointment").search(patient=f"Patient/{patient.id}", status="booked").fetch_all()
    )

    assert [a.id for a in found] == [appointment.id]
    assert found[0]["participant"][1]["actor"]["display"] == "Dr. Rivera"


def test_read_vread_history_and_versions(http: httpx.Client) -> None:
    created = http.post("/Patient", json=_patient())
    assert created.status_code == 201
    pid = created.json()["id"]
    assert created.headers["location"].endswith(f"/Patient/{pid}/_history/1")
    assert created.headers["etag"] == 'W/"1"'
    assert created.headers["content-type"].startswith("application/fhir+json")

    updated = http.put(f"/Patient/{pid}", json=_patient("Smythe", id=pid), headers={"If-Match": 'W/"1"'})
    assert updated.status_code == 200
    assert updated.json()["meta"]["versionId"] == "2"

    assert http.get(f"/Patient/{pid}").json()["name"][0]["family"] == "Smythe"
    assert http.get(f"/Patient/{pid}/_history/1").json()["name"][0]["family"] == "Smith"
    history = http.get(f"/Patient/{pid}/_history").json()
    assert history["type"] == "history"
    assert [e["resource"]["meta"]["versionId"] for e in history["entry"]] == ["2", "1"]
    assert http.get(f"/Patient/{pid}/_history/9").status_code == 404


def test_if_match_on_a_stale_version_is_412(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient()).json()["id"]
    assert (
        http.put(f"/Patient/{pid}", json=_patient(id=pid), headers={"If-Match": 'W/"1"'}).status_code == 200
    )
    stale = http.put(f"/Patient/{pid}", json=_patient(id=pid), headers={"If-Match": 'W/"1"'})
    assert stale.status_code == 412
    assert stale.json()["resourceType"] == "OperationOutcome"


def test_update_creates_when_the_id_is_new(http: httpx.Client) -> None:
    response = http.put("/Patient/chosen-id", json=_patient(id="chosen-id"))
    assert response.status_code == 201
    assert response.json()["meta"]["versionId"] == "1"
    assert http.get("/Patient/chosen-id").status_code == 200


def test_delete_then_read_is_410_and_recreate_continues_versions(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient()).json()["id"]
    assert http.delete(f"/Patient/{pid}").status_code == 204
    gone = http.get(f"/Patient/{pid}")
    assert gone.status_code == 410
    assert gone.json()["issue"][0]["code"] == "deleted"
    assert http.get("/Patient").json()["total"] == 0
    assert http.delete(f"/Patient/{pid}").status_code == 204
    again = http.put(f"/Patient/{pid}", json=_patient(id=pid))
    assert (again.status_code, again.json()["meta"]["versionId"]) == (201, "3")


def test_json_patch(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient(active=False)).json()["id"]
    ops = [
        {"op": "replace", "path": "/active", "value": True},
        {"op": "add", "path": "/gender", "value": "male"},
    ]
    patched = http.patch(
        f"/Patient/{pid}",
        json=ops,
        headers={"Content-Type": "application/json-patch+json", "If-Match": 'W/"1"'},
    )
    assert patched.status_code == 200
    body = patched.json()
    assert (body["active"], body["gender"], body["meta"]["versionId"]) == (True, "male", "2")
    failing = http.patch(
        f"/Patient/{pid}",
        json=[{"op": "test", "path": "/gender", "value": "female"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert failing.status_code == 422
    changes_id = http.patch(
        f"/Patient/{pid}",
        json=[{"op": "replace", "path": "/id", "value": "other"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert changes_id.status_code == 422


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("not json", 400),
        ("[1, 2]", 422),
        ('{"resourceType": "Nonsense"}', 422),
        ('{"name": []}', 422),
        ('{"resourceType": "Observation", "status": "final"}', 422),
    ],
)
def test_invalid_resources_are_refused(http: httpx.Client, body: str, status: int) -> None:
    response = http.post("/Patient", content=body)
    assert response.status_code == status
    assert response.json()["resourceType"] == "OperationOutcome"


def test_update_id_rules(http: httpx.Client) -> None:
    """R4 http.html "update": a body without an id, or with another id than the URL's, is a 400."""
    assert http.put("/Patient/a", json=_patient(id="b")).status_code == 400
    assert http.put("/Patient/a", json=_patient()).status_code == 400
    assert http.put("/Patient/bad_id!", json=_patient(id="bad_id!")).status_code == 422


def test_errors_are_operation_outcomes(http: httpx.Client) -> None:
    unknown_param = http.get("/Patient", params={"shoe-size": "12"})
    assert unknown_param.status_code == 400
    assert "unknown search parameter shoe-size" in unknown_param.json()["issue"][0]["diagnostics"]
    assert http.get("/Patient", params={"birthdate": "notadate"}).status_code == 400
    assert http.get("/Patient", params={"_count": "-1"}).status_code == 400
    assert http.get("/Patient/nope").status_code == 404
    assert http.get("/Nonsense/1").status_code == 404
    assert http.delete("/Patient/nope").status_code == 204  # R4 SHOULD: 200/204 for an unknown id
    assert (
        http.patch(
            "/Patient/nope", json=[], headers={"Content-Type": "application/json-patch+json"}
        ).status_code
        == 404
    )


def test_metadata_is_a_capability_statement(http: httpx.Client) -> None:
    statement = http.get("/metadata").json()
    assert statement["resourceType"] == "CapabilityStatement"
    assert statement["fhirVersion"] == "4.0.1"
    patient = next(r for r in statement["rest"][0]["resource"] if r["type"] == "Patient")
    assert {"name": "birthdate", "type": "date"} in patient["searchParam"]


def test_conditional_create_twice_gives_one_resource(http: httpx.Client) -> None:
    body = _patient(identifier=[{"system": "urn:mrn", "value": "123"}])
    condition = {"If-None-Exist": "identifier=urn:mrn|123"}
    first = http.post("/Patient", json=body, headers=condition)
    second = http.post("/Patient", json=body, headers=condition)
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["id"] == first.json()["id"]
    assert http.get("/Patient", params={"identifier": "urn:mrn|123"}).json()["total"] == 1
    http.put("/Patient/twin", json={**body, "id": "twin"})
    assert http.post("/Patient", json=body, headers=condition).status_code == 412


def test_concurrent_if_match_writes_exactly_one_wins(http: httpx.Client, base: str) -> None:
    pid = http.post("/Patient", json=_patient()).json()["id"]

    def write(n: int) -> int:
        with httpx.Client(base_url=base, headers=FHIR, timeout=30) as own:
            response = own.put(
                f"/Patient/{pid}", json=_patient(f"Writer{n}", id=pid), headers={"If-Match": 'W/"1"'}
            )
            return response.status_code

    assert sorted(at_once(6, write)) == [200, 412, 412, 412, 412, 412]
    assert http.get(f"/Patient/{pid}").json()["meta"]["versionId"] == "2"


def test_search_by_post_form(http: httpx.Client) -> None:
    http.post("/Patient", json=_patient("Alvarez"))
    http.post("/Patient", json=_patient("Baker"))
    response = http.post(
        "/Patient/_search",
        content="family=alv",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200
    assert [e["resource"]["name"][0]["family"] for e in response.json()["entry"]] == ["Alvarez"]


def test_include_and_revinclude(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient()).json()["id"]
    other = http.post("/Patient", json=_patient("Other")).json()["id"]
    appointment = {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [{"actor": {"reference": f"Patient/{pid}"}, "status": "accepted"}],
    }
    aid = http.post("/Appointment", json=appointment).json()["id"]

    included = http.get("/Appointment", params={"_include": "Appointment:patient"}).json()
    assert [(e["resource"]["id"], e["search"]["mode"]) for e in included["entry"]] == [
        (aid, "match"),
        (pid, "include"),
    ]
    assert included["total"] == 1
    revincluded = http.get(
        "/Patient", params={"_revinclude": "Appointment:patient", "_sort": "family"}
    ).json()
    modes = [(e["resource"]["resourceType"], e["search"]["mode"]) for e in revincluded["entry"]]
    assert modes == [("Patient", "match"), ("Patient", "match"), ("Appointment", "include")]
    assert {e["resource"]["id"] for e in revincluded["entry"][:2]} == {pid, other}
    assert http.get("/Appointment", params={"_include": "Appointment:nonsense"}).status_code == 400


def test_paging_over_more_than_a_thousand_results(http: httpx.Client) -> None:
    entries = [
        {"request": {"method": "POST", "url": "Observation"},
         "resource": {"resourceType": "Observation", "status": "final", "code": {"text": "n"}, "valueInteger": n}}
        for n in range(1100)
    ]  # fmt: skip
    assert (
        http.post("", json={"resourceType": "Bundle", "type": "transaction", "entry": entries}).status_code
        == 200
    )

    first = http.get("/Observation").json()
    assert (first["total"], len(first["entry"])) == (1100, 50)
    assert http.get("/Observation", params={"_count": "5000"}).json()["entry"].__len__() == 1000

    seen: list[int] = []
    url: str | None = str(http.base_url).rstrip("/") + "/Observation?_count=400"
    while url:
        page = http.get(url).json()
        seen += [e["resource"]["valueInteger"] for e in page["entry"]]
        url = next((link["url"] for link in page["link"] if link["relation"] == "next"), None)
    assert sorted(seen) == list(range(1100))
    assert http.get("/Observation", params={"_count": "0"}).json() | {} != {}
    assert http.get("/Observation", params={"_count": "0"}).json()["total"] == 1100


def test_transaction_rewrites_urn_uuid_references(http: httpx.Client) -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"fullUrl": "urn:uuid:7f1a0000-0000-4000-8000-000000000001",
             "resource": {"resourceType": "Appointment", "status": "booked",
                          "participant": [{"actor": {"reference": "urn:uuid:7f1a0000-0000-4000-8000-000000000002"},
                                           "status": "accepted"}]},
             "request": {"method": "POST", "url": "Appointment"}},
            {"fullUrl": "urn:uuid:7f1a0000-0000-4000-8000-000000000002",
             "resource": _patient(), "request": {"method": "POST", "url": "Patient"}},
            {"resource": _patient("Fixed", id="fixed"), "request": {"method": "PUT", "url": "Patient/fixed"}},
        ],
    }  # fmt: skip
    response = http.post("", json=bundle)
    assert response.status_code == 200
    result = response.json()
    assert result["type"] == "transaction-response"
    statuses = [e["response"]["status"] for e in result["entry"]]
    assert statuses == ["201 Created", "201 Created", "201 Created"]
    patient_id = result["entry"][1]["resource"]["id"]
    assert patient_id != "7f1a0000-0000-4000-8000-000000000002"
    appointment = result["entry"][0]["resource"]
    assert appointment["participant"][0]["actor"]["reference"] == f"Patient/{patient_id}"
    found = http.get("/Appointment", params={"patient": f"Patient/{patient_id}", "status": "booked"}).json()
    assert found["total"] == 1


def test_transaction_is_atomic(http: httpx.Client) -> None:
    http.put("/Patient/p1", json=_patient(id="p1"))
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": _patient(), "request": {"method": "POST", "url": "Patient"}},
            {
                "resource": _patient(id="p1"),
                "request": {"method": "PUT", "url": "Patient/p1", "ifMatch": 'W/"7"'},
            },
        ],
    }
    response = http.post("", json=bundle)
    assert response.status_code == 409
    assert http.get("/Patient").json()["total"] == 1
    bad = {
        **bundle,
        "entry": [
            bundle["entry"][0],
            {"resource": {"resourceType": "Nope"}, "request": {"method": "POST", "url": "Patient"}},
        ],
    }
    assert http.post("", json=bad).status_code == 422
    assert http.get("/Patient").json()["total"] == 1


def test_transaction_patch_entries_follow_the_patch_interaction(http: httpx.Client) -> None:
    """A PATCH entry whose resource is not a patch (a Binary without base64 JSON Patch data) is a 400
    that rolls the transaction back — it used to be applied as an empty patch, writing an unchanged
    new version. (A Binary that carries one is applied: `test_writes.py`.)"""
    http.put("/Patient/p1", json=_patient(id="p1"))

    def patch_entry(operations: object) -> dict[str, object]:
        return {"resource": operations, "request": {"method": "PATCH", "url": "Patient/p1"}}

    def transaction(*entries: dict[str, object]) -> httpx.Response:
        return http.post("", json={"resourceType": "Bundle", "type": "transaction", "entry": list(entries)})

    binary = transaction(
        patch_entry({"resourceType": "Binary", "contentType": "application/json-patch+json"})
    )
    assert binary.status_code == 400
    assert "not a base64 JSON Patch" in binary.json()["issue"][0]["diagnostics"]
    assert transaction(patch_entry([{"op": "nope", "path": "/active"}])).status_code == 400
    assert transaction(patch_entry([{"op": "remove", "path": "/missing"}])).status_code == 422
    assert http.get("/Patient/p1").json()["meta"]["versionId"] == "1"
    applied = transaction(patch_entry([{"op": "add", "path": "/active", "value": True}]))
    assert applied.status_code == 200
    assert http.get("/Patient/p1").json()["active"] is True


def test_batch_runs_entries_independently(http: httpx.Client) -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "batch",
        "entry": [
            {"resource": _patient(), "request": {"method": "POST", "url": "Patient"}},
            {"request": {"method": "GET", "url": "Patient/missing"}},
            {"resource": _patient("Put", id="b1"), "request": {"method": "PUT", "url": "Patient/b1"}},
        ],
    }
    result = http.post("", json=bundle).json()
    assert result["type"] == "batch-response"
    assert [e["response"]["status"] for e in result["entry"]] == ["201 Created", "404", "201 Created"]
    assert result["entry"][1]["response"]["outcome"]["resourceType"] == "OperationOutcome"
    assert http.get("/Patient").json()["total"] == 2
    assert http.post("", json={"resourceType": "Bundle", "type": "collection"}).status_code == 422


def test_plain_json_content_type_is_accepted(http: httpx.Client) -> None:
    response = http.post("/Patient", json=_patient(), headers={"Content-Type": "application/json"})
    assert response.status_code == 201
    assert response.headers["content-type"].startswith("application/fhir+json")
    plain = http.get("/Patient", headers={"Accept": "application/json"})
    assert plain.headers["content-type"].startswith("application/json")
    assert (
        http.get("/Patient", params={"_format": "json"})
        .headers["content-type"]
        .startswith("application/json")
    )
    assert (
        http.get("/Patient", headers={"Accept": "*/*"})
        .headers["content-type"]
        .startswith("application/fhir+json")
    )


def test_summary_count_and_size_limits(http: httpx.Client) -> None:
    http.post("/Patient", json=_patient())
    counted = http.get("/Patient", params={"_summary": "count"}).json()
    assert (counted["total"], counted["entry"]) == (1, [])
    huge = http.post("/Basic", json={"resourceType": "Basic", "code": {"text": "x" * 5_000_001}})
    assert huge.status_code == 413
    assert huge.json()["issue"][0]["code"] == "too-costly"


def test_patch_needs_json_patch_content_type(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient()).json()["id"]
    wrong = http.patch(f"/Patient/{pid}", json=[{"op": "add", "path": "/active", "value": True}])
    assert wrong.status_code == 415
