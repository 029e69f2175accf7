"""Audit of the FHIR REST surface against SPEC §5.2, through the real server: each test pins a
discrepancy found by driving it (status codes of bundle entries, history paging, PATCH diagnostics).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

FHIR = {"Content-Type": "application/fhir+json"}
Json = dict[str, Any]


@pytest.fixture
def http(new_store: str) -> httpx.Client:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def _outcome(response: httpx.Response, status: int) -> str:
    """The diagnostics of an OperationOutcome answered with `status`."""
    assert response.status_code == status, response.text
    body: Json = response.json()
    assert body["resourceType"] == "OperationOutcome", body
    return str(body["issue"][0]["diagnostics"])


def _bundle(kind: str, *entries: Json) -> Json:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_an_entry_resource_of_an_unknown_type_is_422(http: httpx.Client, method: str) -> None:
    """SPEC §5.2: an invalid resource is 422. An entry writing `{"resourceType": "Nonsense"}` to the
    url `Nonsense` answered 404 (the url's type was checked before the resource), in a transaction
    and as a batch entry's status; a plain `POST /Nonsense` stays 404 (no such endpoint)."""
    url = "Nonsense" if method == "POST" else "Nonsense/n1"
    entry = {"resource": {"resourceType": "Nonsense", "id": "n1"}, "request": {"method": method, "url": url}}
    diagnostics = _outcome(http.post("", json=_bundle("transaction", entry)), 422)
    assert diagnostics == "entry 0: unknown resourceType 'Nonsense'"
    batch = http.post("", json=_bundle("batch", entry))
    assert batch.status_code == 200, batch.text
    [answer] = batch.json()["entry"]
    assert answer["response"]["status"] == "422"
    assert answer["response"]["outcome"]["issue"][0]["code"] == "processing"


def test_an_entry_url_of_an_unknown_type_stays_404(http: httpx.Client) -> None:
    """An unknown type in an entry's url, with no resource to judge, is what the same request alone
    answers: 404 (FHIR http.html: the resource type is not supported)."""
    _outcome(http.post("/Nonsense", json={"resourceType": "Nonsense"}), 404)
    reads = [{"request": {"method": method, "url": "Nonsense/1"}} for method in ("GET", "DELETE")]
    batch = http.post("", json=_bundle("batch", *reads)).json()
    assert [e["response"]["status"] for e in batch["entry"]] == ["404", "404"]
    _outcome(http.post("", json=_bundle("transaction", reads[1])), 404)
    patient = {"resource": {"resourceType": "Patient"}, "request": {"method": "POST", "url": "Nonsense"}}
    _outcome(http.post("", json=_bundle("transaction", patient)), 404)
