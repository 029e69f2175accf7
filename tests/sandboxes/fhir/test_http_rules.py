"""R4 http.html rules the surface follows (issue 15, item 8), one test per rule: the request, what
R4 says, the assertion. Against a real uvicorn server, on SQLite and (with ASSAY_TEST_POSTGRES_URL)
PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import httpx
import pytest
from sqlalchemy import Engine

from assay.sandboxes.fhir import EmbeddedFhir, SurfaceEvent
from tests.sandboxes.conftest import make_app, serve

FHIR = {"Content-Type": "application/fhir+json"}


@pytest.fixture
def http(new_store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def _outcome(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["resourceType"] == "OperationOutcome", body
    return body  # type: ignore[no-any-return]


def test_last_modified_is_an_http_date(http: httpx.Client) -> None:
    """http.html "read": Last-Modified is an HTTP header, so an RFC 9110 HTTP-date; it names the
    same instant as meta.lastUpdated."""
    created = http.post("/Patient", json={"resourceType": "Patient"})
    stamp = parsedate_to_datetime(created.headers["last-modified"])
    read = http.get(f"/Patient/{created.json()['id']}")
    assert read.headers["last-modified"].endswith(" GMT")
    last_updated = read.json()["meta"]["lastUpdated"]
    assert stamp.strftime("%Y-%m-%dT%H:%M:%S") == last_updated[:19]


def test_update_with_another_id_in_the_body_is_400(http: httpx.Client) -> None:
    """http.html "update": "If no id element is provided, or the id disagrees with the id in the
    URL, the server SHALL respond with an HTTP 400 error code"."""
    _outcome(http.put("/Patient/a", json={"resourceType": "Patient", "id": "b"}), 400)
    _outcome(http.put("/Patient/a", json={"resourceType": "Patient"}), 400)


def test_delete_of_an_id_that_never_existed_is_204(http: httpx.Client) -> None:
    """http.html "delete": "If the server refuses to delete resources of that type … or the
    resource does not exist … the server SHOULD return 200 or 204" (we answer 204, as HAPI does
    for a resource that is already gone)."""
    assert http.delete(f"/Patient/{uuid.uuid4().hex}").status_code == 204


@pytest.mark.parametrize(
    ("headers", "params"),
    [({"Accept": "application/fhir+xml"}, {}), ({"Accept": "text/xml"}, {}), ({}, {"_format": "xml"})],
)
def test_a_format_the_server_does_not_speak_is_406(
    http: httpx.Client, headers: dict[str, str], params: dict[str, str]
) -> None:
    """http.html "Content Types and encodings": a server that does not support the requested
    format SHALL return 406 Not Acceptable; `_format` overrides Accept."""
    response = http.get("/Patient", headers=headers, params=params)
    _outcome(response, 406)
    assert response.headers["content-type"].startswith("application/fhir+json")


def test_json_accept_headers_are_served(http: httpx.Client) -> None:
    for accept in (
        "application/fhir+json",
        "application/json",
        "*/*",
        "application/fhir+xml;q=0.9, */*;q=0.1",
    ):
        assert http.get("/Patient", headers={"Accept": accept}).status_code == 200


def test_get_in_a_transaction_sees_the_transactions_writes(http: httpx.Client) -> None:
    """http.html "Transaction Processing Rules": a server SHALL process a transaction's
    interactions in the order DELETE, POST, PUT/PATCH, then GET — so its GETs see its writes."""
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"request": {"method": "GET", "url": "Patient?family=Zebulon"}},
            {
                "resource": {"resourceType": "Patient", "name": [{"family": "Zebulon"}]},
                "request": {"method": "POST", "url": "Patient"},
            },
        ],
    }
    answer = http.post("", json=bundle)
    assert answer.status_code == 200, answer.text
    searchset = answer.json()["entry"][0]["resource"]
    assert searchset["total"] == 1
    assert searchset["entry"][0]["resource"]["name"][0]["family"] == "Zebulon"


def test_a_code_element_matches_its_value_sets_system(http: httpx.Client) -> None:
    """search.html "token": `[system]|[code]` matches a code in that system; a `code` element such as
    Patient.gender takes its system from its required binding (HAPI indexes it so)."""
    pid = http.post("/Patient", json={"resourceType": "Patient", "gender": "male"}).json()["id"]
    http.post("/Patient", json={"resourceType": "Patient", "gender": "female"})
    for query in ("http://hl7.org/fhir/administrative-gender|male", "male"):
        found = http.get("/Patient", params={"gender": query}).json()
        assert [e["resource"]["id"] for e in found["entry"]] == [pid], query
    assert http.get("/Patient", params={"gender": "urn:other|male"}).json()["total"] == 0


def test_an_unauthorized_request_gets_an_operation_outcome(engine: Engine) -> None:
    """http.html: every error is an OperationOutcome a FHIR client can read; a 401 too."""
    fhir = EmbeddedFhir(engine)
    store = "pg_" + uuid.uuid4().hex[:20]
    fhir.provision(store)
    events: list[SurfaceEvent] = []
    for url in serve(make_app(fhir, events, token="s3cret")):
        refused = httpx.get(f"{url}/stores/{store}/fhir/Patient")
        outcome = _outcome(refused, 401)
        assert refused.headers["www-authenticate"] == "Bearer"
        assert outcome["issue"][0]["code"] == "login"  # type: ignore[index]
        allowed = httpx.get(f"{url}/stores/{store}/fhir/Patient", headers={"Authorization": "Bearer s3cret"})
        assert allowed.status_code == 200
