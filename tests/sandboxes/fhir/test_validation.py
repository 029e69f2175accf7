"""Validation of writes (issue 15; issue 5's strict mode made the default). R4 http.html: "400 Bad
Request - resource could not be parsed or failed basic FHIR validation rules". Every write of a
playground — create, update, JSON Patch results, transaction and batch entries — must fit R4
(structure, cardinality, primitive formats, required elements, well-formed references) or fail 400
with an OperationOutcome whose `expression` names each bad element. Dataset loading stays lenient
(SPEC §5.1: a bundle is never rejected); `settings.fhir.strict_validation: false` or
`ASSAY_FHIR_LENIENT=1` relaxes agent writes to the structural checks. Through the whole service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from assay.sandboxes.fhir import surface as fhir_surface
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.validation import validate_strict
from tests.conftest import FIXTURES
from tests.service.builders import error, ok, unique
from tests.service.conftest import Server, serving

Json = dict[str, Any]
LIZ_FILE = "Liz_Conn_27c911c6-f045-4ffa-af5d-6eba57ac94b2.json"
# A seeded resource the R4B model refuses (unknown element): loading must keep it anyway.
ODD_PATIENT = {"resourceType": "Patient", "id": "odd", "gender": "female", "favouriteColour": "teal"}
SEED = {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": ODD_PATIENT}]}
BAD_PATIENT = {"resourceType": "Patient", "birthDate": "1990-13-45", "name": [{"family": 5}]}


def _run(api: httpx.Client, settings: Json | None, data: Json = SEED) -> Json:
    dataset = ok(api.post("/datasets", json={"name": unique("odd"), "type": "fhir", "data": data}), 201)
    body: Json = {"name": unique("env"), "dataset_ids": [dataset["id"]]}
    if settings is not None:
        body["settings"] = settings
    environment = ok(api.post("/environments", json=body), 201)
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("strict"), "environment_id": environment["id"]}), 201
    )
    ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "write"}), 201)
    return ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)


@contextmanager
def _fhir(server: Server, run: Json) -> Iterator[httpx.Client]:
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        base = ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"]
    headers = {"Authorization": f"Bearer {run['bearer_token']}", "Content-Type": "application/fhir+json"}
    with httpx.Client(base_url=server.url + base, headers=headers, timeout=60) as client:
        yield client


def _expressions(response: httpx.Response) -> list[str]:
    assert response.status_code == 400, response.text
    outcome = response.json()
    assert outcome["resourceType"] == "OperationOutcome"
    return [e for issue in outcome["issue"] for e in issue.get("expression", [])]


def test_invalid_writes_fail_400_naming_the_element(server: Server, api: httpx.Client) -> None:
    run = _run(api, {"fhir": {"strict_validation": True}})
    with _fhir(server, run) as fhir:
        assert fhir.get("/Patient/odd").json()["favouriteColour"] == "teal"  # loaded leniently

        refused = fhir.post("/Patient", json=BAD_PATIENT)
        assert sorted(_expressions(refused)) == ["Patient.birthDate", "Patient.name[0].family"]
        assert "Patient.birthDate" in refused.json()["issue"][0]["diagnostics"]
        missing_code = {"resourceType": "Observation", "status": "final"}
        assert _expressions(fhir.post("/Observation", json=missing_code)) == ["Observation.code"]

        created = fhir.post("/Patient", json={"resourceType": "Patient", "birthDate": "1990-01-02"})
        assert created.status_code == 201, created.text
        pid = created.json()["id"]
        put = fhir.put(f"/Patient/{pid}", json={"resourceType": "Patient", "id": pid, "active": "maybe"})
        assert _expressions(put) == ["Patient.active"]
        patched = fhir.patch(
            f"/Patient/{pid}",
            json=[{"op": "add", "path": "/shoeSize", "value": 9}],
            headers={"Content-Type": "application/json-patch+json"},
        )
        assert _expressions(patched) == ["Patient.shoeSize"]
        assert fhir.get(f"/Patient/{pid}").json()["meta"]["versionId"] == "1"
        # The seeded odd Patient cannot be rewritten as it is, but can be fixed.
        assert _expressions(fhir.put("/Patient/odd", json=ODD_PATIENT)) == ["Patient.favouriteColour"]
        fixed = {k: v for k, v in ODD_PATIENT.items() if k != "favouriteColour"}
        assert fhir.put("/Patient/odd", json=fixed).status_code == 200


def test_strict_transaction_rolls_back_and_batch_fails_one_entry(server: Server, api: httpx.Client) -> None:
    run = _run(api, {"fhir": {"strict_validation": True}})
    good = {"resourceType": "Patient", "name": [{"family": "Ok"}]}
    entries = [
        {"fullUrl": "urn:uuid:a", "resource": good, "request": {"method": "POST", "url": "Patient"}},
        {"resource": BAD_PATIENT, "request": {"method": "POST", "url": "Patient"}},
    ]
    with _fhir(server, run) as fhir:
        transaction = fhir.post("/", json={"resourceType": "Bundle", "type": "transaction", "entry": entries})
        assert sorted(_expressions(transaction)) == ["Patient.birthDate", "Patient.name[0].family"]
        assert fhir.get("/Patient", params={"family": "Ok"}).json()["total"] == 0

        batch = ok(fhir.post("/", json={"resourceType": "Bundle", "type": "batch", "entry": entries}))
        statuses = [e["response"]["status"] for e in batch["entry"]]
        assert statuses == ["201 Created", "400"]
        issue = batch["entry"][1]["response"]["outcome"]["issue"][0]
        assert issue["expression"] in (["Patient.birthDate"], ["Patient.name[0].family"])
        assert fhir.get("/Patient", params={"family": "Ok"}).json()["total"] == 1


def test_the_setting_false_relaxes_writes_to_structural_checks(server: Server, api: httpx.Client) -> None:
    run = _run(api, {"fhir": {"strict_validation": False}})
    with _fhir(server, run) as fhir:
        assert fhir.post("/Patient", json=BAD_PATIENT).status_code == 201
        assert fhir.post("/Patient", json={"resourceType": "Nope"}).status_code == 422


def test_strict_without_fhir_resources_fails_the_start(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fhir_surface, "strict_available", lambda: False)
    run = _run(api, {"fhir": {"strict_validation": True}})
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        details = error(agent.post(task_run["start_url"]), 409, "CONFLICT")
    assert "fhir.resources" in details["reason"] and "not installed" in details["reason"]
    assert ok(api.get(f"/task-runs/{task_run['id']}"))["status"] == "failed"


def test_a_non_boolean_strict_setting_fails_the_start(server: Server, api: httpx.Client) -> None:
    run = _run(api, {"fhir": {"strict_validation": "yes"}})
    [task_run] = run["task_runs"]
    with server.client(run["bearer_token"]) as agent:
        details = error(agent.post(task_run["start_url"]), 409, "CONFLICT")
    assert details["reason"] == "settings.fhir.strict_validation must be true or false, got 'yes'"


def test_validate_strict_reports_at_most_a_bounded_number_of_issues() -> None:
    many = {"resourceType": "Patient", **{f"x{i}": i for i in range(50)}}
    with pytest.raises(FhirError) as caught:
        validate_strict(many)
    assert caught.value.status == 400 and caught.value.issues is not None
    assert len(caught.value.issues) == 20
    assert caught.value.diagnostics.endswith("and 47 more")
    validate_strict(
        {"resourceType": "Patient", "meta": {"versionId": "1", "lastUpdated": "2026-01-02T03:04:05.678Z"}}
    )


def test_writes_are_validated_without_any_setting(server: Server, api: httpx.Client) -> None:
    """The issue-15 default: the issue's own example is a 400 naming all three elements."""
    run = _run(api, None)
    with _fhir(server, run) as fhir:
        body = {"resourceType": "Patient", "name": "Smith", "birthDate": "1970-13-45", "foo": 1}
        assert sorted(_expressions(fhir.post("/Patient", json=body))) == [
            "Patient.birthDate",
            "Patient.foo",
            "Patient.name",
        ]
        reference = {"resourceType": "Patient", "managingOrganization": {"reference": "not a reference"}}
        assert _expressions(fhir.post("/Patient", json=reference)) == [
            "Patient.managingOrganization.reference"
        ]


def test_assay_fhir_lenient_relaxes_every_playground(server: Server, api: httpx.Client) -> None:
    """The FHIR surface's `lenient` setting (`ASSAY_FHIR_LENIENT=1`), recorded at start: the playground stays
    lenient when a strict server (the shared one, same database) serves it afterwards."""
    run = _run(api, {"fhir": {"strict_validation": True}})
    with serving(server, surface_settings={"fhir": {"lenient": True}}) as lenient:
        with _fhir(lenient, run) as fhir:
            assert fhir.post("/Patient", json={"resourceType": "Patient", "active": "bad"}).status_code == 201
        [task_run] = run["task_runs"]
        base = f"/v1/task-runs/{task_run['id']}/fhir"
    with server.client(run["bearer_token"]) as agent:
        later = agent.post(f"{base}/Patient", json={"resourceType": "Patient", "active": "maybe"})
    assert later.status_code == 201, later.text


def test_real_synthea_resources_pass_strict_validation() -> None:
    """No false positives on real data: every resource of a Synthea bundle (urn:uuid references
    and all) fits its R4B model, so strict mode does not refuse what real EHR data looks like."""
    bundle = json.loads((FIXTURES / "fhir" / "synthea" / "smart-2019" / LIZ_FILE).read_text())
    resources = [entry["resource"] for entry in bundle["entry"]]
    assert len(resources) > 50
    for resource in resources:
        validate_strict(resource)


def test_r4_types_without_an_r4b_model_get_the_reference_check_only() -> None:
    """R4's RiskEvidenceSynthesis has no R4B model (fhir.resources answers "not a valid FHIR
    Model", a ValueError): it is not refused for that, but a malformed reference still is."""
    validate_strict({"resourceType": "RiskEvidenceSynthesis", "status": "draft"})
    with pytest.raises(FhirError) as caught:
        validate_strict({"resourceType": "RiskEvidenceSynthesis", "population": {"reference": "nope"}})
    assert caught.value.issues is not None
    assert caught.value.issues[0]["expression"] == ["RiskEvidenceSynthesis.population.reference"]


def test_seeding_an_assay_fhir_server_is_lenient_and_agents_cannot_ask_for_it(
    new_store: str, server: Server, api: httpx.Client
) -> None:
    """SPEC §5.1: datasets load leniently. Seeding an external `assay fhir-server` store
    (`ASSAY_FHIR_ISOLATION=assay-store`) goes through its batch endpoint with `X-Assay-Seed: 1`,
    which that server (token-protected) honours; a playground surface ignores the header."""
    batch = {"resourceType": "Bundle", "type": "batch", "entry": [
        {"resource": ODD_PATIENT, "request": {"method": "PUT", "url": "Patient/odd"}},
    ]}  # fmt: skip
    with httpx.Client(
        base_url=new_store, headers={"Content-Type": "application/fhir+json"}, timeout=30
    ) as store:
        refused = ok(store.post("", json=batch))
        assert refused["entry"][0]["response"]["status"] == "400"
        seeded = ok(store.post("", json=batch, headers={"X-Assay-Seed": "1"}))
        assert seeded["entry"][0]["response"]["status"] == "201 Created"
    run = _run(api, None)
    with _fhir(server, run) as fhir:
        answered = ok(fhir.post("/", json=batch, headers={"X-Assay-Seed": "1"}))
        assert answered["entry"][0]["response"]["status"] == "400"


YES_PATIENT = {"resourceType": "Patient", "active": "yes", "identifier": [{"system": "urn:t", "value": "y"}]}
"""pydantic's lax mode reads `"yes"` as true: the models alone let it through."""
BARE_OBSERVATION = {"resourceType": "Observation", "subject": {"reference": "Patient/p1"}}
"""Without both of its required elements (status, a primitive, and code)."""


def test_every_write_path_refuses_a_primitive_of_the_wrong_json_type(
    server: Server, api: httpx.Client
) -> None:
    """Create, PUT as create and as update, conditional update, JSON Patch and FHIRPath Patch
    results, transaction and batch entries: each is a 400 naming `Patient.active`, and nothing
    is stored (the store then reads back as a strict client expects)."""
    run = _run(api, None)
    with _fhir(server, run) as fhir:
        assert _expressions(fhir.post("/Patient", json=YES_PATIENT)) == ["Patient.active"]
        assert _expressions(fhir.put("/Patient/new-one", json={**YES_PATIENT, "id": "new-one"})) == [
            "Patient.active"
        ]
        assert fhir.get("/Patient/new-one").status_code == 404

        good = {**YES_PATIENT, "active": True}
        pid = ok(fhir.post("/Patient", json=good), 201)["id"]
        assert _expressions(fhir.put(f"/Patient/{pid}", json={**YES_PATIENT, "id": pid})) == [
            "Patient.active"
        ]
        conditional = fhir.put("/Patient", params={"identifier": "urn:t|y"}, json=YES_PATIENT)
        assert _expressions(conditional) == ["Patient.active"]
        json_patch = fhir.patch(
            f"/Patient/{pid}",
            json=[{"op": "replace", "path": "/active", "value": "yes"}],
            headers={"Content-Type": "application/json-patch+json"},
        )
        assert _expressions(json_patch) == ["Patient.active"]
        fhirpath_patch = {"resourceType": "Parameters", "parameter": [{"name": "operation", "part": [
            {"name": "type", "valueCode": "replace"},
            {"name": "path", "valueString": "Patient.active"},
            {"name": "value", "valueString": "yes"},
        ]}]}  # fmt: skip
        assert _expressions(fhir.patch(f"/Patient/{pid}", json=fhirpath_patch)) == ["Patient.active"]

        entry = {"resource": {**YES_PATIENT, "id": "t1"}, "request": {"method": "PUT", "url": "Patient/t1"}}
        transaction = fhir.post("/", json={"resourceType": "Bundle", "type": "transaction", "entry": [entry]})
        assert _expressions(transaction) == ["Patient.active"]
        batch = ok(fhir.post("/", json={"resourceType": "Bundle", "type": "batch", "entry": [entry]}))
        [answer] = batch["entry"]
        assert answer["response"]["status"] == "400"
        assert [i["expression"] for i in answer["response"]["outcome"]["issue"]] == [["Patient.active"]]

        stored = ok(fhir.get("/Patient", params={"_count": 100}))
        assert [
            e["resource"]["meta"]["versionId"] for e in stored["entry"] if e["resource"]["id"] == pid
        ] == ["1"]
        assert all(isinstance(e["resource"].get("active", True), bool) for e in stored["entry"])
        numbers = {"resourceType": "Patient", "multipleBirthInteger": "2"}
        assert _expressions(fhir.post("/Patient", json=numbers)) == ["Patient.multipleBirthInteger"]


def test_an_invalid_resource_gets_every_problem_in_one_answer(server: Server, api: httpx.Client) -> None:
    """An Observation without status and code is told of both, whichever write sends it, and the
    issue codes say what kind each is."""
    run = _run(api, None)
    with _fhir(server, run) as fhir:
        for response in (
            fhir.post("/Observation", json=BARE_OBSERVATION),
            fhir.put("/Observation/o1", json={**BARE_OBSERVATION, "id": "o1"}),
        ):
            assert sorted(_expressions(response)) == ["Observation.code", "Observation.status"]
            assert {issue["code"] for issue in response.json()["issue"]} == {"required"}
        twice = {**BARE_OBSERVATION, "status": "final", "code": {"text": "x"}, "valueString": "a",
                 "valueBoolean": True, "component": [{"valueInteger": "3"}]}  # fmt: skip
        assert sorted(_expressions(fhir.post("/Observation", json=twice))) == [
            "Observation.component[0].code",
            "Observation.component[0].valueInteger",
            "Observation.value[x]",
        ]
        entry = {"resource": BARE_OBSERVATION, "request": {"method": "POST", "url": "Observation"}}
        batch = ok(fhir.post("/", json={"resourceType": "Bundle", "type": "batch", "entry": [entry]}))
        issues = batch["entry"][0]["response"]["outcome"]["issue"]
        assert sorted(e for issue in issues for e in issue["expression"]) == [
            "Observation.code",
            "Observation.status",
        ]
        # The `_status` extension stands in for a missing required primitive (R4 json.html).
        absent = {**BARE_OBSERVATION, "code": {"text": "x"}, "_status": {"extension": [
            {"url": "http://hl7.org/fhir/StructureDefinition/data-absent-reason", "valueCode": "unknown"},
        ]}}  # fmt: skip
        assert fhir.post("/Observation", json=absent).status_code == 201


def test_lenient_mode_still_stores_what_it_stored(server: Server, api: httpx.Client) -> None:
    run = _run(api, {"fhir": {"strict_validation": False}})
    with _fhir(server, run) as fhir:
        assert fhir.put("/Patient/y1", json={**YES_PATIENT, "id": "y1"}).status_code == 201
        assert fhir.post("/Observation", json=BARE_OBSERVATION).status_code == 201


def test_a_strict_client_reads_every_patient_after_a_bad_put(server: Server, api: httpx.Client) -> None:
    """SMART's fhirclient refuses a `Patient.active` that is not a boolean, and with it the whole
    search page: a `PUT` of one must be refused, not stored."""
    from fhirclient import client as smart_client
    from fhirclient.models.patient import Patient

    fine = {"resourceType": "Patient", "id": "fine", "active": True}
    run = _run(api, None, {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": fine}]})
    with _fhir(server, run) as fhir:
        ok(fhir.post("/Patient", json={"resourceType": "Patient", "active": False}), 201)
        assert fhir.put("/Patient/yes", json={**YES_PATIENT, "id": "yes"}).status_code == 400
        smart = smart_client.FHIRClient(settings={"app_id": "assay-test", "api_base": str(fhir.base_url)})
        smart.server.session.headers["Authorization"] = fhir.headers["Authorization"]
        patients = Patient.where(struct={"_count": "100"}).perform_resources(smart.server)
    assert len(patients) == 2 and "fine" in {p.id for p in patients}
