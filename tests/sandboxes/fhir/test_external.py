"""`ASSAY_FHIR_URL`: the FHIR surface forwards to an external server — here a second Assay FHIR
server plays that part (issue 5) — with the generic tag strategy isolating playgrounds."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from fhirpy import SyncFHIRClient

from assay.sandboxes.fhir.external import TAG_SYSTEM, ExternalFhir, ForwardedRequest
from assay.sandboxes.fhir.outcomes import FhirError
from tests.sandboxes import test_playgrounds as playgrounds
from tests.sandboxes.test_playgrounds import BOOKED_WITH_RIVERA, LIZ, _book, _fhir_benchmark
from tests.service.builders import ok
from tests.service.conftest import serving

if TYPE_CHECKING:
    from tests.sandboxes.conftest import FhirServer
    from tests.service.conftest import Server


@pytest.fixture
def external(fhir_server: FhirServer) -> str:
    """A fresh store on the second Assay FHIR server: the `ASSAY_FHIR_URL` of `server` below."""
    store_id = "ext_" + uuid.uuid4().hex[:12]
    fhir_server.fhir.provision(store_id)
    return fhir_server.base(store_id)


@pytest.fixture
def forwarding(server: Server, external: str) -> Iterator[Server]:
    """A server on the shared one's database whose `Settings` forward FHIR to `external`
    (`ASSAY_FHIR_URL`, the tag strategy): the shared server and its environment are left alone."""
    with serving(server, surface_settings={"fhir": {"url": external}}) as forwarding:
        yield forwarding


@dataclass(frozen=True)
class StartedRun:
    """One task run of a one-task FHIR benchmark, started by its agent."""

    agent: httpx.Client
    task_run: dict[str, Any]
    playground_id: str
    base: str
    """The agent's FHIR base (absolute)."""
    token: str

    def fhir(self) -> SyncFHIRClient:
        return SyncFHIRClient(self.base, authorization=f"Bearer {self.token}")

    def complete(self) -> httpx.Response:
        return self.agent.post(self.task_run["complete_url"])


@contextmanager
def started_run(server: Server, api: httpx.Client) -> Iterator[StartedRun]:
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        started = ok(agent.post(task_run["start_url"]))
        base = server.url + started["endpoints"]["fhir"]
        yield StartedRun(agent, task_run, started["playground_id"], base, run["bearer_token"])


def test_playgrounds_on_an_external_server(forwarding: Server, api: httpx.Client, external: str) -> None:
    run = _fhir_benchmark(api, tasks=2, concurrency=2)
    first, second = run["task_runs"]
    token = run["bearer_token"]
    with forwarding.client(token) as agent:
        bases = [
            forwarding.url + ok(agent.post(tr["start_url"]))["endpoints"]["fhir"] for tr in (first, second)
        ]
        one = SyncFHIRClient(bases[0], authorization=f"Bearer {token}")
        two = SyncFHIRClient(bases[1], authorization=f"Bearer {token}")

        appointment_id = _book(one)
        found = one.resources("Appointment").search(patient=f"Patient/{LIZ}", status="booked").fetch_all()
        assert [a.id for a in found] == [appointment_id]
        liz = one.resources("Patient").search(_id=LIZ).fetch_all()[0]
        assert "meta" not in liz or TAG_SYSTEM not in json.dumps(liz["meta"])
        liz["gender"] = "other"
        liz.save()
        assert agent.get(f"{bases[0]}/Patient/{LIZ}").json()["gender"] == "other"

        assert two.resources("Appointment").fetch_all() == []
        assert two.resources("Patient").search(_id=LIZ).fetch_all()[0]["gender"] == "female"
        assert agent.get(f"{bases[1]}/Appointment/{appointment_id}").status_code == 404

        on_server = httpx.get(f"{external}/Patient", params={"_count": "10"}).json()
        assert on_server["total"] == 2
        assert all(
            TAG_SYSTEM in {t["system"] for t in e["resource"]["meta"]["tag"]} for e in on_server["entry"]
        )
        assert all(
            e["resource"]["id"].endswith(LIZ) and e["resource"]["id"] != LIZ for e in on_server["entry"]
        )

        scores = [ok(agent.post(tr["complete_url"]))["score"] for tr in (first, second)]
        assert agent.get(f"{bases[0]}/Patient").status_code == 409
    assert scores == [1.0, 0.5]

    state = api.get(f"/task-runs/{first['id']}/state")
    with tarfile.open(fileobj=io.BytesIO(state.content)) as archive:
        names = archive.getnames()
    assert f"snapshot/fhir/Appointment/{appointment_id}.json" in names
    assert f"snapshot/fhir/Patient/{LIZ}.json" in names
    assert ok(api.post(f"/task-runs/{first['id']}/rescore"))["score"] == 1.0


def test_transactions_through_an_external_server(
    forwarding: Server, api: httpx.Client, external: str
) -> None:
    run = _fhir_benchmark(api)
    [task_run] = run["task_runs"]
    with forwarding.client(run["bearer_token"]) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
        bundle = {
            "resourceType": "Bundle",
            "type": "transaction",
            "entry": [
                {"fullUrl": "urn:uuid:0b7e0000-0000-4000-8000-00000000000a",
                 "resource": {"resourceType": "Appointment", "status": "booked", "participant": [
                     {"actor": {"reference": "urn:uuid:0b7e0000-0000-4000-8000-00000000000b"}, "status": "accepted"}]},
                 "request": {"method": "POST", "url": "Appointment"}},
                {"fullUrl": "urn:uuid:0b7e0000-0000-4000-8000-00000000000b",
                 "resource": {"resourceType": "Patient", "name": [{"family": "Newcomer"}]},
                 "request": {"method": "POST", "url": "Patient"}},
            ],
        }  # fmt: skip
        result = ok(agent.post(base, json=bundle))
        assert [e["response"]["status"] for e in result["entry"]] == ["201 Created", "201 Created"]
        patient_id = result["entry"][1]["resource"]["id"]
        found = ok(agent.get(f"{base}/Appointment", params={"patient": f"Patient/{patient_id}"}))
        assert found["total"] == 1
        assert (
            found["entry"][0]["resource"]["participant"][0]["actor"]["reference"] == f"Patient/{patient_id}"
        )
        created = agent.post(
            f"{base}/Patient",
            json={"resourceType": "Patient", "identifier": [{"system": "urn:x", "value": "1"}]},
            headers={"If-None-Exist": "identifier=urn:x|1"},
        )
        again = agent.post(
            f"{base}/Patient",
            json={"resourceType": "Patient", "identifier": [{"system": "urn:x", "value": "1"}]},
            headers={"If-None-Exist": "identifier=urn:x|1"},
        )
        assert (created.status_code, again.status_code) == (201, 200)
        assert again.json()["id"] == created.json()["id"]
        assert agent.get(f"{base}/Patient/{created.json()['id']}").status_code == 200


def _entry(resource: dict[str, Any], method: str, url: str) -> bytes:
    """A one-entry transaction, as bytes."""
    entry = {"resource": resource, "request": {"method": method, "url": url}}
    return json.dumps({"resourceType": "Bundle", "type": "transaction", "entry": [entry]}).encode()


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("Patient", b"[" * 150 + b"]" * 150, 400),  # past the nesting limit: not json.loads' RecursionError
        ("Patient", b"[" * 5000 + b"]" * 5000, 400),
        ("", b'{"resourceType": "Bundle", "type": "batch", "entry": {"a": 1}}', 400),
        ("", b'{"resourceType": "Bundle", "type": "batch", "entry": ["x"]}', 400),
        ("", b'{"resourceType": "Bundle", "type": "batch", "entry": [{"request": "GET"}]}', 400),
        (
            "",
            b'{"resourceType": "Bundle", "type": "batch", "entry": [{"request": {"method": "GET", "url": "Nope/1"}}]}',
            404,
        ),
        # An entry's resource is checked as a create's or update's body is (they raised: a 500).
        ("", _entry({"resourceType": "Patient", "id": 5}, "PUT", "Patient/x"), 400),
        ("", _entry({"resourceType": "Patient", "meta": [1]}, "POST", "Patient"), 422),
        ("", _entry({"resourceType": "Patient", "id": "a/b"}, "POST", "Patient"), 422),
    ],
)
def test_bad_bodies_are_refused_before_forwarding(path: str, body: bytes, status: int) -> None:
    """The external backend applies the embedded surface's body and bundle-entry rules (a 4xx
    OperationOutcome); a deep body or a non-object entry used to raise out of `forward` (a 500)."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"resourceType": "Bundle", "type": "batch-response"})

    server = ExternalFhir("http://fhir.invalid", httpx.Client(transport=httpx.MockTransport(answer)))
    with pytest.raises(FhirError) as refused:
        server.forward(ForwardedRequest("pg_x", "http://assay.invalid/fhir", "POST", path, body=body))
    assert refused.value.status == status
    assert sent == []


def test_a_get_on_the_base_with_a_query_is_forwarded_with_the_tag(
    forwarding: Server, api: httpx.Client, fhir_server: FhirServer, external: str
) -> None:
    """A paging link on the base (HAPI's `[base]?_getpages=…`) or a system-level search is sent to
    the server's base with the playground's `_tag` (the Assay FHIR server serves neither and
    answers 405 itself); the bare base stays Assay's 405, not forwarded."""
    with started_run(forwarding, api) as run:
        store_path = urlsplit(external).path
        before = len(fhir_server.events)
        paged = run.agent.get(run.base, params={"_getpages": "abc"})
        [sent] = [e for e in fhir_server.events[before:] if e.path.startswith(store_path)]
        tag = urlencode({"_tag": f"{TAG_SYSTEM}|{run.playground_id}"})
        assert (sent.method, sent.path) == ("GET", f"{store_path}?_getpages=abc&{tag}")
        assert paged.status_code == 405 and "allow" not in paged.headers  # the server's answer
        bare = run.agent.get(run.base)
        assert (bare.status_code, bare.headers["allow"]) == (405, "POST")
        assert [e for e in fhir_server.events[before:] if e.path.startswith(store_path)] == [sent]


NOT_STRICT = [
    ("POST", "Patient", b'{"resourceType": "Patient", "extension": [{"url": "u", "valueDecimal": NaN}]}'),
    ("PUT", f"Patient/{LIZ}", b'{"resourceType": "Patient", "id": "%s", "multipleBirthInteger": Infinity}' % LIZ.encode()),
    ("POST", "", b'{"resourceType": "Bundle", "type": "batch", "entry": [{"resource": {"resourceType": "Patient", "multipleBirthInteger": 1e999}, "request": {"method": "POST", "url": "Patient"}}]}'),
    ("PATCH", f"Patient/{LIZ}", b'[{"op": "add", "path": "/gender", "value": "\\ud800"}]'),
]  # fmt: skip
"""Bodies `json.loads` takes but no store or client can hold (`store/json_values.py`), one per
interaction that forwards a JSON body."""


def refusals_of_not_strict_bodies(agent: httpx.Client, base: str) -> list[tuple[int, dict[str, Any]]]:
    """The status and OperationOutcome each `NOT_STRICT` body gets at `base`."""
    answers = []
    for method, path, body in NOT_STRICT:
        media = "application/json-patch+json" if method == "PATCH" else "application/fhir+json"
        response = agent.request(method, f"{base}/{path}", content=body, headers={"Content-Type": media})
        answers.append((response.status_code, response.json()))
    return answers


def test_bodies_that_are_not_strict_json_are_refused_before_forwarding(
    forwarding: Server, api: httpx.Client, fhir_server: FhirServer, external: str
) -> None:
    """The embedded surface's strict-JSON 400 (NaN, Infinity, `1e999`, a lone surrogate), the same
    OperationOutcome, before anything reaches the server: such a body went out as `NaN` (the server
    refused it) or failed to encode (a 500)."""
    with started_run(forwarding, api) as run:
        store_path = urlsplit(external).path
        before = len(fhir_server.events)
        answers = refusals_of_not_strict_bodies(run.agent, run.base)
        assert [e for e in fhir_server.events[before:] if e.path.startswith(store_path)] == []
    with httpx.Client() as direct:  # the embedded surface's own answers
        assert answers == refusals_of_not_strict_bodies(direct, external)
    assert {status for status, _ in answers} == {400}
    assert all("is not valid JSON at" in outcome["issue"][0]["diagnostics"] for _, outcome in answers)


def test_a_conditional_create_whose_search_fails_creates_nothing(
    forwarding: Server, api: httpx.Client, fhir_server: FhirServer, external: str
) -> None:
    """`If-None-Exist` with a parameter the server refuses answers the server's 400, as the embedded
    surface does; the search's error used to read as "no match", and the resource was created."""
    with started_run(forwarding, api) as run:
        store_path = urlsplit(external).path
        before = len(fhir_server.events)
        refused = run.agent.post(
            f"{run.base}/Patient", json={"resourceType": "Patient"}, headers={"If-None-Exist": "nonsense=1"}
        )
        assert refused.status_code == 400 and refused.json()["resourceType"] == "OperationOutcome"
        sent = [e.method for e in fhir_server.events[before:] if e.path.startswith(store_path)]
        assert sent == ["GET"]  # the search, and no write after it


def test_a_conditional_create_in_a_bundle_finds_the_existing_resource(
    forwarding: Server, api: httpx.Client, external: str
) -> None:
    """`request.ifNoneExist` in a transaction or batch entry is honoured as `If-None-Exist` is (a
    tag-scoped search, then the write): it was dropped when the POST became a PUT, so each bundle
    created another copy."""
    with started_run(forwarding, api) as run:

        def bundle(kind: str) -> dict[str, Any]:
            return {"resourceType": "Bundle", "type": kind, "entry": [{
                "fullUrl": "urn:uuid:0b7e0000-0000-4000-8000-0000000000c1",
                "resource": {"resourceType": "Patient", "identifier": [{"system": "urn:c", "value": "7"}]},
                "request": {"method": "POST", "url": "Patient", "ifNoneExist": "identifier=urn:c|7"},
            }, {
                "resource": {"resourceType": "Observation", "status": "final", "code": {"text": "x"},
                             "subject": {"reference": "urn:uuid:0b7e0000-0000-4000-8000-0000000000c1"}},
                "request": {"method": "POST", "url": "Observation"},
            }]}  # fmt: skip

        first = ok(run.agent.post(run.base, json=bundle("transaction")))
        again = ok(run.agent.post(run.base, json=bundle("transaction")))
        batch = ok(run.agent.post(run.base, json=bundle("batch")))
        statuses = [[e["response"]["status"] for e in b["entry"]] for b in (first, again, batch)]
        assert statuses == [["201 Created"] * 2, ["200 OK", "201 Created"], ["200 OK", "201 Created"]]
        patient_id = first["entry"][0]["resource"]["id"]
        assert again["entry"][0]["resource"]["id"] == patient_id
        found = ok(run.agent.get(f"{run.base}/Patient", params={"identifier": "urn:c|7"}))
        assert [e["resource"]["id"] for e in found["entry"]] == [patient_id]
        observations = ok(
            run.agent.get(f"{run.base}/Observation", params={"subject": f"Patient/{patient_id}"})
        )
        assert observations["total"] == 3  # each bundle's reference resolved to the one Patient


def judge_the_reference_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_fhir_benchmark`'s "booked" criterion also judges `participant.0.actor.reference` as text:
    the search `patient=Patient/<id>` compares a reference's tail, absolute or not; a field on
    the reference does not, so it scores an absolute reference in a capture differently."""
    reference = {"path": "participant.0.actor.reference", "expected": f"Patient/{LIZ}"}
    booked = {**BOOKED_WITH_RIVERA, "fields": [*BOOKED_WITH_RIVERA["fields"], reference]}
    monkeypatch.setattr(playgrounds, "BOOKED_WITH_RIVERA", booked)


def book_with_an_absolute_reference(run: StartedRun) -> str:
    """Book with Dr. Rivera, the patient's reference absolute under the agent's own base; the
    agent's `patient=` search finds it. Returns the Appointment's id."""
    appointment = {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [
            {"actor": {"reference": f"{run.base}/Patient/{LIZ}"}, "status": "accepted"},
            {"actor": {"display": "Dr. Rivera"}, "status": "accepted"},
        ],
    }
    appointment_id = str(ok(run.agent.post(f"{run.base}/Appointment", json=appointment), 201)["id"])
    found = ok(run.agent.get(f"{run.base}/Appointment", params={"patient": f"Patient/{LIZ}"}))
    assert [e["resource"]["id"] for e in found["entry"]] == [appointment_id]
    return appointment_id


def captured_relative(api: httpx.Client, run: StartedRun, appointment_id: str) -> None:
    """`complete` scores the capture as it would a relative reference (with
    `judge_the_reference_text`), and the state tar.gz holds `Patient/<id>`."""
    completed = ok(run.complete())
    assert (completed["score"], completed["verdict"]) == (1.0, "pass")
    assert completed["checks"][0]["evidence"]["resource"] == f"Appointment/{appointment_id}"
    state = api.get(f"/task-runs/{run.task_run['id']}/state")
    with tarfile.open(fileobj=io.BytesIO(state.content)) as archive:
        captured = archive.extractfile(f"snapshot/fhir/Appointment/{appointment_id}.json")
        assert captured is not None
        assert json.load(captured)["participant"][0]["actor"]["reference"] == f"Patient/{LIZ}"


def test_an_absolute_reference_goes_out_relative_and_is_captured_so(
    forwarding: Server, api: httpx.Client, external: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the tag an agent's absolute reference went to the server as written (its Assay base,
    no playground prefix): the agent's own `patient=` search missed it. It goes out relative and
    namespaced, and is captured relative."""
    judge_the_reference_text(monkeypatch)
    with started_run(forwarding, api) as run:
        appointment_id = book_with_an_absolute_reference(run)
        on_server = httpx.get(f"{external}/Appointment", params={"_count": "100"}).json()
        [stored] = [e["resource"] for e in on_server["entry"] if e["resource"]["id"].endswith(appointment_id)]
        assert stored["participant"][0]["actor"]["reference"].endswith(f"-{LIZ}")
        assert stored["participant"][0]["actor"]["reference"].startswith("Patient/a")
        captured_relative(api, run, appointment_id)
