"""Conditional references (`"reference": "Patient?identifier=…"`) in transaction and batch bundles
(FHIR R4 http.html "Transaction Processing Rules"), against a real uvicorn server with raw httpx:
exactly one match is rewritten to `Type/id`; none or several fail the transaction with 412 naming
the entry and the reference (a batch fails only that entry); a bad query is 400. The state searched
is the store before the transaction with the transaction's own writes in place.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from assay.formats.fhir import bundles
from assay.sandboxes.fhir import resources

FHIR = {"Content-Type": "application/fhir+json"}
BY_MRN = "Patient?identifier=urn:mrn|42"
Json = dict[str, Any]


@pytest.fixture
def http(new_store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def _patient(mrn: str = "42", **extra: Any) -> Json:
    return {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": mrn}], **extra}


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
    pid = http.post("/Patient", json=_patient()).json()["id"]
    http.post("/Patient", json=_patient("7"))
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
    response = http.post("", json=_bundle("transaction", _post(_patient("1")), _post(_observation(BY_MRN))))
    assert response.status_code == 412
    assert response.json()["resourceType"] == "OperationOutcome"
    assert _diagnostics(response) == (
        f"entry 1: conditional reference {BY_MRN!r} matches no Patient; it must match exactly one"
    )
    assert (_total(http, "Patient"), _total(http, "Observation")) == (before, 0)


def test_two_matches_fail_even_with_a_count_of_one(http: httpx.Client) -> None:
    http.post("/Patient", json=_patient())
    http.post("/Patient", json=_patient())
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


def test_a_batch_fails_only_the_entry_whose_reference_does_not_resolve(http: httpx.Client) -> None:
    pid = http.post("/Patient", json=_patient()).json()["id"]
    http.put("/Observation/o1", json=_observation("Patient/x", id="o1"))
    batch = _bundle(
        "batch",
        _post(_observation(BY_MRN)),
        _post(_observation("Patient?identifier=urn:mrn|404")),
        {"resource": _observation(BY_MRN, id="o1"), "request": {"method": "PUT", "url": "Observation/o1"}},
        {"resource": _observation("Patient?bogus=1"),
         "request": {"method": "PUT", "url": "Observation?identifier=urn:obs|1"}},
        _post(_patient("8")),
    )  # fmt: skip
    response = http.post("", json=batch)
    assert response.status_code == 200, response.text
    entries = response.json()["entry"]
    statuses = [e["response"]["status"] for e in entries]
    assert statuses == ["201 Created", "412", "200 OK", "400", "201 Created"]
    assert [e["resource"]["subject"]["reference"] for e in (entries[0], entries[2])] == [f"Patient/{pid}"] * 2
    failed = entries[1]["response"]["outcome"]["issue"][0]["diagnostics"]
    assert failed.startswith(
        "entry 1: conditional reference 'Patient?identifier=urn:mrn|404' matches no Patient"
    )
    assert _total(http, "Observation") == 2
    assert http.get("/Observation/o1").json()["subject"]["reference"] == f"Patient/{pid}"


def test_with_urn_uuid_rewriting_and_the_transactions_own_writes(http: httpx.Client) -> None:
    """The referencing entries come first: resolution sees everything the transaction writes."""
    practitioner = http.post("/Practitioner", json={"resourceType": "Practitioner",
                             "identifier": [{"system": "urn:npi", "value": "1"}]}).json()["id"]  # fmt: skip
    old = http.post("/Patient", json=_patient("9")).json()["id"]
    encounter = {"resourceType": "Encounter", "status": "finished", "class": {"code": "AMB"},
                 "subject": {"reference": "Patient?identifier=urn:mrn|new"},
                 "participant": [{"individual": {"reference": "Practitioner?identifier=urn:npi|1"}}]}  # fmt: skip
    transaction = _bundle(
        "transaction",
        _post(_observation("urn:uuid:p", performer=[{"reference": "Practitioner?identifier=urn:npi|1"}],
                           encounter={"reference": "urn:uuid:e"})),
        _post(encounter, "urn:uuid:e"),
        _post(_observation("Patient?identifier=urn:mrn|renumbered")),
        _post(_patient("new"), "urn:uuid:p"),
        {"resource": _patient("renumbered", id=old), "request": {"method": "PUT", "url": f"Patient/{old}"}},
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
    gone = http.post("/Patient", json=_patient("gone")).json()["id"]
    moved = http.post("/Patient", json=_patient("moved")).json()["id"]
    deleting = _bundle(
        "transaction",
        {"request": {"method": "DELETE", "url": f"Patient/{gone}"}},
        _post(_observation("Patient?identifier=urn:mrn|gone")),
    )
    assert http.post("", json=deleting).status_code == 412
    renumbering = _bundle(
        "transaction",
        {
            "resource": _patient("elsewhere", id=moved),
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
    literal = ("Patient/1?x=y", "patient?identifier=x", "http://elsewhere/fhir/Patient?identifier=x")
    for reference in literal:
        kept = http.post("", json=_bundle("transaction", _post(_observation(reference))))
        assert kept.status_code == 200, reference
        assert kept.json()["entry"][0]["resource"]["subject"]["reference"] == reference


def test_the_sandbox_rewriter_is_the_dataset_loaders() -> None:
    """One walker (the external backend imports it from `resources`, dataset loading from below)."""
    assert resources.rewrite_references is bundles.rewrite_references
