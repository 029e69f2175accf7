"""The external server's base never reaches an agent, and never reaches a capture as an absolute
reference (issue 5 review): `hide_base` on its own, then each strategy's answers and captures
against an httpx `MockTransport` that writes its base everywhere a server may."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from assay.sandboxes.fhir.external import ForwardedRequest, HapiPartitions, IsolatedFhir, TaggedFhir
from assay.sandboxes.fhir.external.forwarding import hidden, hide_base, relative_under

ASSAY = "http://assay.invalid/v1/task-runs/tr_1/fhir"
SERVER = "http://hapi.invalid:8080/fhir"
SPACE = f"{SERVER}/assay-pg_A"  # a HAPI partition's base
ESCAPED = SPACE.replace("/", "\\/")


def test_hide_base_replaces_the_base_in_every_string_of_decoded_json() -> None:
    raw = (
        '{"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": "not-found",'
        f' "diagnostics": "Resource {ESCAPED}\\/Patient\\/1 is not known to {SPACE}/",'
        f' "details": {{"text": "see {SPACE}, or {SPACE}?_id=1"}}, "expression": ["{SPACE}"]}}],'
        f' "text": {{"status": "generated", "div": "<div>{SPACE}#x</div>"}},'
        f' "extension": [{{"url": "urn:x", "valueUrl": "{SPACE}/Binary/b"}}], "{SPACE}": 1}}'
    )
    mapped = hide_base(json.loads(raw), SPACE, ASSAY)
    [issue] = mapped["issue"]
    assert issue["diagnostics"] == f"Resource {ASSAY}/Patient/1 is not known to {ASSAY}/"
    assert issue["details"]["text"] == f"see {ASSAY}, or {ASSAY}?_id=1"
    assert issue["expression"] == [ASSAY]
    assert mapped["text"]["div"] == f"<div>{ASSAY}#x</div>"
    assert mapped["extension"][0]["valueUrl"] == f"{ASSAY}/Binary/b"
    assert mapped[SPACE] == 1  # keys are element names, never rewritten
    assert SPACE not in json.dumps({k: v for k, v in mapped.items() if k != SPACE})


def test_hide_base_leaves_other_paths_on_the_server_and_other_values_alone() -> None:
    """`…/assay-pg_A-binary` or `…/assay-pg_AB` is not under the base (as `is_under` decides for a
    whole URL); numbers, booleans and nulls pass."""
    value = {"a": [f"{SPACE}-binary/x", f"{SPACE}B/Patient/1", 3, None, True], "b": {"c": f"{SPACE}."}}
    assert hide_base(value, SPACE, ASSAY) == {
        "a": [f"{SPACE}-binary/x", f"{SPACE}B/Patient/1", 3, None, True],
        "b": {"c": f"{ASSAY}."},
    }
    assert hidden("no base here", SPACE, ASSAY) == "no base here"
    assert hidden(SPACE, SPACE, "a\\1") == "a\\1"  # the new base is literal, not a regex template


def test_relative_under_maps_only_references_below_the_base() -> None:
    relative = relative_under(SPACE)
    assert relative(f"{SPACE}/Patient/1") == "Patient/1"
    assert relative(f"{SPACE}/Patient/1/_history/2") == "Patient/1/_history/2"
    assert [relative(x) for x in (f"{SPACE}/", SPACE, "Patient/1", f"{SPACE}-binary/Patient/1")] == [None] * 4


def _leaky(base: str, rid: str) -> httpx.MockTransport:
    """A server that writes `base` into everything: a read answers a 404 OperationOutcome, a
    search a searchset with links, a Binary and a transaction-response-like location."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/metadata"):
            statement = {
                "resourceType": "CapabilityStatement",
                "rest": [{"resource": [{"type": "Appointment"}]}],
            }
            return httpx.Response(200, json=statement)
        headers = {
            "Content-Location": f"{base}/Patient/{rid}/_history/1",
            "Location": f"{base}/Patient/{rid}",
        }
        if request.url.path.endswith(f"/Patient/{rid}"):
            escaped = base.replace("/", "\\/")  # as some JSON encoders write it
            outcome = (
                '{"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": "not-found",'
                f' "diagnostics": "{escaped}\\/Patient\\/{rid} is gone",'
                f' "details": {{"text": "{base}/"}}}}]}}'
            )
            return httpx.Response(404, content=outcome.encode(), headers=headers)
        appointment = {
            "resourceType": "Appointment", "id": f"{rid}-appt", "status": "booked",
            "participant": [{"actor": {"reference": f"{base}/Patient/{rid}"}, "status": "accepted"}],
            "text": {"status": "generated", "div": f"<div>Booked at {base}</div>"},
        }  # fmt: skip
        bundle = {
            "resourceType": "Bundle", "type": "searchset", "total": 2,
            "link": [{"relation": "self", "url": f"{base}/Appointment?_count=1000"}],
            "entry": [
                {"fullUrl": f"{base}/Appointment/{rid}-appt", "resource": appointment,
                 "response": {"status": "200 OK", "location": f"{base}/Appointment/{rid}-appt/_history/1"}},
                {"fullUrl": f"{base}/Binary/{rid}-b", "search": {"mode": "include"},
                 "resource": {"resourceType": "Binary", "id": f"{rid}-b", "contentType": "text/plain",
                              "securityContext": {"reference": f"{base}/Patient/{rid}"}}},
            ],
        }  # fmt: skip
        return httpx.Response(200, json=bundle, headers=headers)

    return httpx.MockTransport(answer)


def _everything(result: Any) -> str:
    return json.dumps([result.status, result.body, result.headers])


def test_an_isolated_answer_never_shows_the_space() -> None:
    client = httpx.Client(transport=_leaky(SPACE, "1"))
    fhir = IsolatedFhir(HapiPartitions(SERVER, client), client)
    read = fhir.forward(ForwardedRequest("pg_A", ASSAY, "GET", "Patient/1"))
    assert read.status == 404 and read.body is not None
    assert read.body["issue"][0]["diagnostics"] == f"{ASSAY}/Patient/1 is gone"
    assert read.body["issue"][0]["details"]["text"] == f"{ASSAY}/"
    assert read.headers["Content-Location"] == f"{ASSAY}/Patient/1/_history/1"
    assert read.headers["Location"] == f"{ASSAY}/Patient/1"
    search = fhir.forward(ForwardedRequest("pg_A", ASSAY, "GET", "Appointment"))
    for result in (read, search):
        assert "hapi.invalid" not in _everything(result) and "assay-pg_A" not in _everything(result)
    assert search.body is not None
    [appointment, binary] = search.body["entry"]
    assert appointment["resource"]["participant"][0]["actor"]["reference"] == f"{ASSAY}/Patient/1"
    assert appointment["response"]["location"] == f"{ASSAY}/Appointment/1-appt/_history/1"
    assert binary["fullUrl"] == f"{ASSAY}/Binary/1-b"


def test_an_isolated_capture_keeps_references_relative() -> None:
    """A server that writes absolute references under the space's base: captured as `Patient/1`, so
    a criterion's `patient=Patient/1` scores as on the embedded store (SPEC §6)."""
    client = httpx.Client(transport=_leaky(SPACE, "1"))
    captured = IsolatedFhir(HapiPartitions(SERVER, client), client).snapshot("pg_A")
    assert [r["participant"][0]["actor"]["reference"] for r in captured] == ["Patient/1"]
    assert captured[0]["text"]["div"] == f"<div>Booked at {SPACE}</div>"  # free text is the server's


@pytest.mark.parametrize("base", [SERVER, f"{SERVER}/"])
def test_a_tagged_answer_never_shows_the_server(base: str) -> None:
    """Under the tag the server's base goes the same way; ids quoted in free text keep their
    playground prefix (`aa-1`: `pg_A`'s), only URL-valued elements and references lose it."""
    client = httpx.Client(transport=_leaky(SERVER, "aa-1"))
    fhir = TaggedFhir(base, client)
    read = fhir.forward(ForwardedRequest("pg_A", ASSAY, "GET", "Patient/1"))
    assert read.body is not None and read.body["issue"][0]["diagnostics"] == f"{ASSAY}/Patient/aa-1 is gone"
    assert read.headers["Content-Location"] == f"{ASSAY}/Patient/1/_history/1"
    search = fhir.forward(ForwardedRequest("pg_A", ASSAY, "GET", "Appointment"))
    for result in (read, search):
        assert "hapi.invalid" not in _everything(result)
    assert search.body is not None
    [appointment, binary] = search.body["entry"]
    assert appointment["resource"]["participant"][0]["actor"]["reference"] == f"{ASSAY}/Patient/1"
    assert appointment["resource"]["text"]["div"] == f"<div>Booked at {ASSAY}</div>"
    assert binary["resource"]["securityContext"]["reference"] == f"{ASSAY}/Patient/1"


def test_a_tagged_capture_keeps_references_relative_and_unprefixed() -> None:
    client = httpx.Client(transport=_leaky(SERVER, "aa-1"))
    [appointment] = TaggedFhir(SERVER, client).snapshot("pg_A")
    assert appointment["id"] == "1-appt"
    assert appointment["participant"][0]["actor"]["reference"] == "Patient/1"
