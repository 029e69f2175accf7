"""Conditional update and delete (FHIR R4 §3.1.0.4.3, §3.1.0.7.1), conditional references and
type- and system-level history, against a real uvicorn server with raw httpx and fhirpy: 0 matches
create (update) or do nothing (delete), 1 match is written, more than one is 412; the same in
transaction and batch bundles; `_history` lists the playground's own versions newest first, paged,
with `_since`.

Conditional references (`"reference": "Patient?identifier=…"`, R4 http.html "Transaction
Processing Rules") in transaction bundles: exactly one match is rewritten to `Type/id`;
none or several fail the transaction with 412 naming the entry and the reference; a bad query is
400. Batch entries keep them as sent (R4: transactions only). The state searched is the store before the transaction with
the transaction's own writes in place.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fhirpy import SyncFHIRClient

from assay.formats.fhir import bundles
from assay.sandboxes.fhir import resources
from tests.sandboxes.conftest import FhirServer

FHIR = {"Content-Type": "application/fhir+json"}
MRN = "identifier=urn:mrn|42"
BY_MRN = f"Patient?{MRN}"
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
    assert "validated against R4" in rest["documentation"]


# -- conditional references ----------------------------------------------------------------------


def _observation(subject: str, **extra: Any) -> Json:
    return {"resourceType": "Observation", "status": "final", "code": {"text": "bp"},
            "subject": {"reference": subject}, **extra}  # fmt: skip


def _post(resource: Json, full_url: str | None = None) -> Json:
    entry = {"resource": resource, "request": {"method": "POST", "url": resource["resourceType"]}}
    return {**entry, "fullUrl": full_url} if full_url else entry


def _bundle(kind: str, *entries: Json) -> Json:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


def _diagnostics(response: httpx.Response) -> str:
    return str(response.json()["issue"][0]["diagnostics"])


def _total(http: httpx.Client, resource_type: str) -> int:
    return int(http.get(f"/{resource_type}").json()["total"])


def test_one_match_is_rewritten_to_type_slash_id(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient("Doe")).json()["id"]
    http.post("/Patient", json=_patient("Doe", "7"))
    response = http.post("", json=_bundle("transaction", _post(_observation(BY_MRN))))
    assert response.status_code == 200, response.text
    [entry] = response.json()["entry"]
    assert entry["resource"]["subject"]["reference"] == f"Patient/{pid}"

    oid = entry["resource"]["id"]
    assert http.get(f"/Observation/{oid}").json()["subject"]["reference"] == f"Patient/{pid}"
    found = http.get("/Observation", params={"subject": f"Patient/{pid}"}).json()
    assert [e["resource"]["id"] for e in found["entry"]] == [oid]


def test_no_match_fails_the_whole_transaction_naming_entry_and_reference(http: httpx.Client) -> None:
    before = _total(http, "Patient")
    response = http.post(
        "", json=_bundle("transaction", _post(_patient("Doe", "1")), _post(_observation(BY_MRN)))
    )
    assert response.status_code == 412
    assert response.json()["resourceType"] == "OperationOutcome"
    assert _diagnostics(response) == (
        f"entry 1: conditional reference {BY_MRN!r} matches no Patient; it must match exactly one"
    )
    assert (_total(http, "Patient"), _total(http, "Observation")) == (before, 0)


def test_two_matches_fail_even_with_a_count_of_one(http: httpx.Client) -> None:
    http.post("/Patient", json=_patient("Doe"))
    http.post("/Patient", json=_patient("Doe"))
    for reference in (BY_MRN, BY_MRN + "&_count=1&_sort=-_lastUpdated"):
        response = http.post("", json=_bundle("transaction", _post(_observation(reference))))
        assert response.status_code == 412
        assert "matches 2 Patient resources" in _diagnostics(response)
        assert f"entry 0: conditional reference {reference!r}" in _diagnostics(response)
    assert _total(http, "Observation") == 0


def test_a_bad_query_is_400_with_the_reason(http: httpx.Client) -> None:
    cases = {
        "Patient?shoe-size=9": "unknown search parameter shoe-size",
        "Patient?birthdate=yesterday": "birthdate",
        "Patient?_count=1&_format=json": "no search parameter to match on",
        "Patient?": "no search parameter to match on",
        "Nonsense?identifier=x": "unknown resource type Nonsense",
    }
    for reference, reason in cases.items():
        response = http.post("", json=_bundle("transaction", _post(_observation(reference))))
        assert response.status_code == 400, reference
        assert _diagnostics(response).startswith(f"entry 0: conditional reference {reference!r}: ")
        assert reason in _diagnostics(response), _diagnostics(response)
    assert _total(http, "Observation") == 0


def test_a_batch_keeps_conditional_references_as_sent(http: httpx.Client) -> None:
    """R4 defines conditional references for transactions only: batch entries write them as sent,
    resolvable or not (so a dataset loaded per SPEC §5.1, which leaves unresolvable ones alone, can
    be seeded into another Assay server with a batch of PUTs). The same text in a transaction
    resolves."""
    pid = http.post("/Patient", json=_patient("Doe")).json()["id"]
    unresolvable = "Patient?identifier=urn:mrn|404"
    batch = _bundle(
        "batch",
        _post(_observation(BY_MRN)),
        _post(_observation(unresolvable)),
        {"resource": _observation(BY_MRN, id="o1"), "request": {"method": "PUT", "url": "Observation/o1"}},
    )
    response = http.post("", json=batch)
    assert response.status_code == 200, response.text
    entries = response.json()["entry"]
    assert [e["response"]["status"] for e in entries] == ["201 Created", "201 Created", "201 Created"]
    assert [e["resource"]["subject"]["reference"] for e in entries] == [BY_MRN, unresolvable, BY_MRN]
    assert http.get("/Observation/o1").json()["subject"]["reference"] == BY_MRN
    resolved = http.post("", json=_bundle("transaction", _post(_observation(BY_MRN))))
    assert resolved.json()["entry"][0]["resource"]["subject"]["reference"] == f"Patient/{pid}"


def test_with_urn_uuid_rewriting_and_the_transactions_own_writes(http: httpx.Client) -> None:
    """The referencing entries come first: resolution sees everything the transaction writes."""
    practitioner = http.post("/Practitioner", json={"resourceType": "Practitioner",
                             "identifier": [{"system": "urn:npi", "value": "1"}]}).json()["id"]  # fmt: skip
    old = http.post("/Patient", json=_patient("Doe", "9")).json()["id"]
    encounter = {"resourceType": "Encounter", "status": "finished", "class": {"code": "AMB"},
                 "subject": {"reference": "Patient?identifier=urn:mrn|new"},
                 "participant": [{"individual": {"reference": "Practitioner?identifier=urn:npi|1"}}]}  # fmt: skip
    transaction = _bundle(
        "transaction",
        _post(_observation("urn:uuid:p", performer=[{"reference": "Practitioner?identifier=urn:npi|1"}],
                           encounter={"reference": "urn:uuid:e"})),
        _post(encounter, "urn:uuid:e"),
        _post(_observation("Patient?identifier=urn:mrn|renumbered")),
        _post(_patient("Doe", "new"), "urn:uuid:p"),
        {"resource": _patient("Doe", "renumbered", id=old), "request": {"method": "PUT", "url": f"Patient/{old}"}},
    )  # fmt: skip
    response = http.post("", json=transaction)
    assert response.status_code == 200, response.text
    entries = [e["resource"] for e in response.json()["entry"]]
    new, encounter_id = entries[3]["id"], entries[1]["id"]
    assert entries[0]["subject"]["reference"] == f"Patient/{new}"
    assert entries[0]["performer"][0]["reference"] == f"Practitioner/{practitioner}"
    assert entries[0]["encounter"]["reference"] == f"Encounter/{encounter_id}"
    assert entries[1]["subject"]["reference"] == f"Patient/{new}"
    assert entries[1]["participant"][0]["individual"]["reference"] == f"Practitioner/{practitioner}"
    assert entries[2]["subject"]["reference"] == f"Patient/{old}"
    stored = http.get(f"/Encounter/{encounter_id}").json()
    assert stored["subject"]["reference"] == f"Patient/{new}"


def test_deleted_and_rewritten_resources_no_longer_match_as_they_were(http: httpx.Client) -> None:
    gone = http.post("/Patient", json=_patient("Doe", "gone")).json()["id"]
    moved = http.post("/Patient", json=_patient("Doe", "moved")).json()["id"]
    deleting = _bundle(
        "transaction",
        {"request": {"method": "DELETE", "url": f"Patient/{gone}"}},
        _post(_observation("Patient?identifier=urn:mrn|gone")),
    )
    assert http.post("", json=deleting).status_code == 412
    renumbering = _bundle(
        "transaction",
        {
            "resource": _patient("Doe", "elsewhere", id=moved),
            "request": {"method": "PUT", "url": f"Patient/{moved}"},
        },
        _post(_observation("Patient?identifier=urn:mrn|moved")),
    )
    assert http.post("", json=renumbering).status_code == 412
    assert http.get(f"/Patient/{gone}").status_code == 200
    assert _total(http, "Observation") == 0


def test_plain_writes_and_patch_results_keep_conditional_references_as_sent(http: httpx.Client) -> None:
    """FHIR defines conditional references for transactions only; a stored one (plain REST, or a
    dataset reference that did not resolve, SPEC §5.1) does not fail a later PATCH entry."""
    created = http.post("/Observation", json=_observation(BY_MRN))
    assert created.status_code == 201
    oid = created.json()["id"]
    assert http.get(f"/Observation/{oid}").json()["subject"]["reference"] == BY_MRN
    assert http.put(f"/Observation/{oid}", json=_observation(BY_MRN, id=oid)).status_code == 200

    patch = [{"op": "add", "path": "/issued", "value": "2024-01-01T00:00:00Z"}]
    patched = http.post("", json=_bundle(
        "transaction", {"resource": patch, "request": {"method": "PATCH", "url": f"Observation/{oid}"}}
    ))  # fmt: skip
    assert patched.status_code == 200, patched.text
    assert http.get(f"/Observation/{oid}").json()["subject"]["reference"] == BY_MRN
    elsewhere = "http://elsewhere/fhir/Patient?identifier=x"
    kept = http.post("", json=_bundle("transaction", _post(_observation(elsewhere))))
    assert kept.status_code == 200, kept.text
    assert kept.json()["entry"][0]["resource"]["subject"]["reference"] == elsewhere
    for malformed in ("Patient/1?x=y", "patient?identifier=x"):  # not references at all: validation's 400
        refused = http.post("", json=_bundle("transaction", _post(_observation(malformed))))
        assert refused.status_code == 400, malformed
        assert refused.json()["issue"][0]["expression"] == ["Observation.subject.reference"]


def test_the_sandbox_rewriter_is_the_dataset_loaders() -> None:
    """One walker (the external backend imports it from `resources`, dataset loading from below)."""
    assert resources.rewrite_references is bundles.rewrite_references


def test_an_upsert_and_a_reference_by_identifier_in_one_transaction(http: httpx.Client) -> None:
    """The v2-style bundle: a conditional PUT creates the Patient the Observation names by MRN."""
    upsert = {
        "resource": _patient("Doe", "v2"),
        "request": {"method": "PUT", "url": "Patient?identifier=urn:mrn|v2"},
    }
    response = http.post(
        "", json=_bundle("transaction", _post(_observation("Patient?identifier=urn:mrn|v2")), upsert)
    )
    assert response.status_code == 200, response.text
    observation, patient = (e["resource"] for e in response.json()["entry"])
    assert observation["subject"]["reference"] == f"Patient/{patient['id']}"
    again = http.post(
        "", json=_bundle("transaction", _post(_observation("Patient?identifier=urn:mrn|v2")), upsert)
    )
    assert [e["response"]["status"] for e in again.json()["entry"]] == ["201 Created", "200 OK"]
    assert again.json()["entry"][0]["resource"]["subject"]["reference"] == f"Patient/{patient['id']}"
