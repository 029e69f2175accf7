"""Write interactions of issue 15 (items 4–6): a query string on POST (conditional create),
conditional PATCH, FHIRPath Patch, a Binary JSON Patch inside a transaction, and the `Prefer`
header. Each test: the request, what R4 says, the assertion; against a real uvicorn server on
SQLite and (with ASSAY_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest

FHIR = {"Content-Type": "application/fhir+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
MRN = "urn:mrn"


@pytest.fixture
def http(new_store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def _patient(mrn: str, family: str = "Smith") -> dict[str, object]:
    return {
        "resourceType": "Patient",
        "identifier": [{"system": MRN, "value": mrn}],
        "name": [{"family": family}],
    }


def test_a_query_string_on_post_is_a_conditional_create(http: httpx.Client) -> None:
    """http.html "conditional create" (as HAPI and R5 also read `POST [type]?criteria`): no match
    creates (201), one match answers 200 with it and creates nothing, several are 412."""
    first = http.post("/Patient", params={"identifier": f"{MRN}|1"}, json=_patient("1"))
    again = http.post("/Patient", params={"identifier": f"{MRN}|1"}, json=_patient("1"))
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert http.get("/Patient", params={"identifier": f"{MRN}|1"}).json()["total"] == 1
    http.post("/Patient", json=_patient("2", "Twin"))
    http.post("/Patient", json=_patient("3", "Twin"))
    assert http.post("/Patient", params={"family": "Twin"}, json=_patient("4")).status_code == 412
    differ = http.post(
        "/Patient", params={"family": "Twin"}, json=_patient("4"), headers={"If-None-Exist": "family=Other"}
    )
    assert differ.status_code == 400
    assert http.post("/Patient", params={"_format": "json"}, json=_patient("5")).status_code == 201


def test_conditional_patch(http: httpx.Client) -> None:
    """http.html "patch": `PATCH [type]?criteria` patches the one match; none is 404, several 412."""
    pid = http.post("/Patient", json=_patient("7")).json()["id"]
    ops = [{"op": "add", "path": "/active", "value": True}]
    patched = http.patch("/Patient", params={"identifier": f"{MRN}|7"}, json=ops, headers=JSON_PATCH)
    assert patched.status_code == 200, patched.text
    assert patched.json()["id"] == pid and patched.json()["active"] is True
    assert (
        http.patch("/Patient", params={"identifier": f"{MRN}|0"}, json=ops, headers=JSON_PATCH).status_code
        == 404
    )
    http.post("/Patient", json=_patient("8", "Same"))
    http.post("/Patient", json=_patient("9", "Same"))
    assert http.patch("/Patient", params={"family": "Same"}, json=ops, headers=JSON_PATCH).status_code == 412


def _operation(kind: str, path: str, **parts: object) -> dict[str, object]:
    rows: list[dict[str, object]] = [
        {"name": "type", "valueCode": kind},
        {"name": "path", "valueString": path},
    ]
    for name, value in parts.items():
        if name == "name":
            rows.append({"name": "name", "valueString": value})
        elif name in ("index", "source", "destination"):
            rows.append({"name": name, "valueInteger": value})
        else:
            rows.append({"name": "value", name: value})
    return {"name": "operation", "part": rows}


def test_fhirpath_patch(http: httpx.Client) -> None:
    """fhirpatch.html: a Parameters of operations (add, insert, delete, replace, move) whose paths
    are FHIRPath; sent as application/fhir+json."""
    body = {
        **_patient("10"),
        "telecom": [{"system": "phone", "value": "1"}, {"system": "email", "value": "a@b"}],
    }
    pid = http.post("/Patient", json=body).json()["id"]
    patch = {"resourceType": "Parameters", "parameter": [
        _operation("add", "Patient", name="birthDate", valueDate="1970-01-02"),
        _operation("replace", "Patient.name[0].family", valueString="Smythe"),
        _operation("add", "Patient.name[0]", name="given", valueString="Ann"),
        _operation("delete", "Patient.telecom.where(system = 'email')"),
        _operation("insert", "Patient.telecom", index=0, valueContactPoint={"system": "sms", "value": "2"}),
        _operation("add", "Patient", name="generalPractitioner", valueReference={"reference": "Practitioner/x"}),
    ]}  # fmt: skip
    patched = http.patch(f"/Patient/{pid}", json=patch)
    assert patched.status_code == 200, patched.text
    result = patched.json()
    assert result["birthDate"] == "1970-01-02"
    assert result["name"][0] == {"family": "Smythe", "given": ["Ann"]}
    assert [t["system"] for t in result["telecom"]] == ["sms", "phone"]
    assert result["generalPractitioner"] == [{"reference": "Practitioner/x"}]
    bad_path = {
        "resourceType": "Parameters",
        "parameter": [_operation("replace", "Patient.name.family", valueString="X")],
    }
    http.patch(f"/Patient/{pid}", json={"resourceType": "Parameters", "parameter": [
        _operation("add", "Patient", name="name", valueHumanName={"family": "Second"})]})  # fmt: skip
    assert http.patch(f"/Patient/{pid}", json=bad_path).status_code == 422  # two names: not one element
    invalid = {
        "resourceType": "Parameters",
        "parameter": [_operation("add", "Patient", name="birthTime", valueString="x")],
    }
    assert http.patch(f"/Patient/{pid}", json=invalid).status_code == 400  # the result fails validation
    assert http.patch(f"/Patient/{pid}", json={"op": "add"}).status_code == 415  # neither kind of patch


def test_binary_json_patch_in_a_transaction(http: httpx.Client) -> None:
    """http.html "Transaction": a PATCH entry carries its JSON Patch as a Binary resource
    (`contentType` application/json-patch+json, base64 `data`), or a FHIRPath Patch Parameters."""
    pid = http.post("/Patient", json=_patient("11")).json()["id"]
    ops = [{"op": "add", "path": "/active", "value": False}]
    binary = {"resourceType": "Binary", "contentType": "application/json-patch+json",
              "data": base64.b64encode(json.dumps(ops).encode()).decode()}  # fmt: skip
    bundle = {"resourceType": "Bundle", "type": "transaction", "entry": [
        {"resource": binary, "request": {"method": "PATCH", "url": f"Patient/{pid}"}},
    ]}  # fmt: skip
    answer = http.post("", json=bundle)
    assert answer.status_code == 200, answer.text
    assert http.get(f"/Patient/{pid}").json()["active"] is False
    binary["data"] = base64.b64encode(b"not json").decode()
    assert http.post("", json=bundle).status_code == 400


def test_prefer_return(http: httpx.Client) -> None:
    """http.html §3.1.0.1.9: `Prefer: return=minimal` sends no body, `return=OperationOutcome` an
    OperationOutcome, `return=representation` (the default) the resource; headers stay."""
    minimal = http.post("/Patient", json=_patient("12"), headers={"Prefer": "return=minimal"})
    assert minimal.status_code == 201 and minimal.content == b""
    assert minimal.headers["location"] and minimal.headers["etag"] == 'W/"1"'
    pid = minimal.headers["location"].split("/Patient/")[1].split("/")[0]
    outcome = http.put(
        f"/Patient/{pid}", json={**_patient("12"), "id": pid}, headers={"Prefer": "return=OperationOutcome"}
    )
    assert outcome.status_code == 200 and outcome.json()["resourceType"] == "OperationOutcome"
    full = http.put(
        f"/Patient/{pid}", json={**_patient("12"), "id": pid}, headers={"Prefer": "return=representation"}
    )
    assert full.json()["meta"]["versionId"] == "3"


def test_prefer_handling(http: httpx.Client) -> None:
    """search.html "Handling errors": `handling=lenient` ignores parameters the server does not
    know (and the self link shows what it used); strict (the default) answers 400."""
    http.post("/Patient", json=_patient("13"))
    assert http.get("/Patient", params={"shoe-size": "9"}).status_code == 400
    lenient = http.get(
        "/Patient",
        params={"shoe-size": "9", "identifier": f"{MRN}|13"},
        headers={"Prefer": "handling=lenient"},
    )
    assert lenient.status_code == 200 and lenient.json()["total"] == 1
    assert "shoe-size" not in lenient.json()["link"][0]["url"]
    strict = http.get("/Patient", params={"shoe-size": "9"}, headers={"Prefer": "handling=strict"})
    assert strict.status_code == 400


def test_summary_and_elements(http: httpx.Client) -> None:
    """search.html §3.1.1.5.8–9: `_summary` and `_elements` return subsets, each marked with the
    SUBSETTED tag; `_summary=count` only the total."""
    body = {**_patient("14"), "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"},
            "maritalStatus": {"text": "M"}, "photo": [{"title": "p"}]}  # fmt: skip
    pid = http.post("/Patient", json=body).json()["id"]
    subsetted = {"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}

    def one(params: dict[str, str]) -> dict[str, object]:
        found = http.get("/Patient", params={"_id": pid, **params}).json()
        resource: dict[str, object] = found["entry"][0]["resource"]
        return resource

    summary = one({"_summary": "true"})
    assert (
        "name" in summary
        and "identifier" in summary
        and "photo" not in summary
        and "maritalStatus" not in summary
    )
    assert subsetted in summary["meta"]["tag"]  # type: ignore[index]
    assert set(one({"_summary": "text"})) == {"resourceType", "id", "meta", "text"}
    data = one({"_summary": "data"})
    assert "text" not in data and "photo" in data
    assert set(one({"_elements": "name,photo"})) == {"resourceType", "id", "meta", "name", "photo"}
    assert http.get("/Patient", params={"_summary": "count"}).json().get("entry", []) == []
    read = http.get(f"/Patient/{pid}", params={"_elements": "name"}).json()
    assert set(read) == {"resourceType", "id", "meta", "name"}
    assert "tag" not in http.get(f"/Patient/{pid}").json()["meta"]  # the stored resource is whole
    assert http.get("/Patient", params={"_summary": "maybe"}).status_code == 400
