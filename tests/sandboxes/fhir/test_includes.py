"""`_include=*`, `_include=Type:*` and `:iterate` includes (FHIR R4 search §3.1.1.5.4-5) against a
real uvicorn server: a wildcard follows every reference search parameter of the matched type;
`:iterate` applies again to what was included, until nothing new turns up; nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

FHIR = {"Content-Type": "application/fhir+json"}
GRAPH = [
    {"resourceType": "Patient", "id": "p"},
    {"resourceType": "Practitioner", "id": "dr"},
    {"resourceType": "Encounter", "id": "e", "status": "finished", "class": {"code": "AMB"},
     "subject": {"reference": "Patient/p"}, "participant": [{"individual": {"reference": "Practitioner/dr"}}]},
    {"resourceType": "Observation", "id": "o", "status": "final", "code": {"text": "bp"},
     "subject": {"reference": "Patient/p"}, "encounter": {"reference": "Encounter/e"}},
]  # fmt: skip


@pytest.fixture
def http(new_store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        entries = [
            {"resource": r, "request": {"method": "PUT", "url": f"{r['resourceType']}/{r['id']}"}}
            for r in GRAPH
        ]
        loaded = client.post("/", json={"resourceType": "Bundle", "type": "transaction", "entry": entries})
        assert loaded.status_code == 200, loaded.text
        yield client


def _found(http: httpx.Client, path: str, params: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    response = http.get(path, params=params)
    assert response.status_code == 200, response.text
    entries = response.json()["entry"]
    key = [f"{e['resource']['resourceType']}/{e['resource']['id']}" for e in entries]
    modes = [e["search"]["mode"] for e in entries]
    return [k for k, m in zip(key, modes, strict=True) if m == "match"], sorted(
        k for k, m in zip(key, modes, strict=True) if m == "include"
    )


def test_wildcards_follow_every_reference_of_the_matches(http: httpx.Client) -> None:
    for spec in ("*", "Observation:*"):
        assert _found(http, "/Observation", [("_include", spec)]) == (
            ["Observation/o"],
            ["Encounter/e", "Patient/p"],
        )
    assert _found(http, "/Observation", [("_include", "Observation:*:Patient")]) == (
        ["Observation/o"],
        ["Patient/p"],
    )
    assert _found(http, "/Observation", [("_include", "Encounter:*")]) == (["Observation/o"], [])


def test_iterate_follows_included_resources_too(http: httpx.Client) -> None:
    plain = [("_include", "Observation:encounter"), ("_include", "Encounter:participant")]
    assert _found(http, "/Observation", plain)[1] == ["Encounter/e"]
    iterate = [("_include", "Observation:encounter"), ("_include:iterate", "Encounter:participant")]
    assert _found(http, "/Observation", iterate)[1] == ["Encounter/e", "Practitioner/dr"]
    everything = [("_include:iterate", "*")]
    assert _found(http, "/Observation", everything)[1] == ["Encounter/e", "Patient/p", "Practitioner/dr"]

    reverse = [
        ("_id", "p"),
        ("_revinclude", "Encounter:subject"),
        ("_revinclude:iterate", "Observation:encounter"),
    ]
    assert _found(http, "/Patient", reverse) == (["Patient/p"], ["Encounter/e", "Observation/o"])
    assert _found(http, "/Patient", reverse[:2])[1] == ["Encounter/e"]


def test_bad_include_values_are_400(http: httpx.Client) -> None:
    for name, value in [
        ("_revinclude", "*"),
        ("_include:deep", "*"),
        ("_include", "Nope:*"),
        ("_include", "*:x"),
    ]:
        response = http.get("/Observation", params={name: value})
        assert response.status_code == 400, (name, value, response.text)
        assert response.json()["resourceType"] == "OperationOutcome"
