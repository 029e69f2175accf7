"""FHIRPath Patch (issue 15), from R4 fhirpatch.html: a Parameters of `operation`s whose `path`
is a FHIRPath expression, sent with `PATCH [type]/[id]` as application/fhir+json.

R4's rules: "The FHIRPath statement must return a single element"; "Except for the delete
operation, it is an error if no element matches the specified path"; delete: "Only a single
element can be deleted"; "The type of the value must be correct for the place at which it will be
added/inserted. Servers SHALL return an error if the type is wrong". Errors: a path that does not
parse is a malformed patch (400); one that selects nothing or more than one element cannot be
applied (422, RFC 5789 §2.2); the answer is an OperationOutcome and nothing is written. Paths
here are the ones R4's examples use — the resource type, nested elements, indexers, `where(...)`,
choice elements. On an `assay fhir-server` store and through a run token, SQLite and (with
ASSAY_TEST_POSTGRES_URL) PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

MRN = "http://example.org/mrn"
Json = dict[str, Any]


def _operation(kind: str, path: str, **parts: Any) -> Json:
    rows: list[Json] = [{"name": "type", "valueCode": kind}, {"name": "path", "valueString": path}]
    for name, value in parts.items():
        if name == "name":
            rows.append({"name": "name", "valueString": value})
        elif name in ("index", "source", "destination"):
            rows.append({"name": name, "valueInteger": value})
        elif name == "parts":
            rows.append({"name": "value", "part": value})
        else:
            rows.append({"name": "value", name: value})
    return {"name": "operation", "part": rows}


def _patch(*operations: Json) -> Json:
    return {"resourceType": "Parameters", "parameter": list(operations)}


def _patient(http: httpx.Client, **elements: Any) -> str:
    created = http.post("/Patient", json={"resourceType": "Patient", **elements})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _applied(http: httpx.Client, path: str, *operations: Json) -> Json:
    response = http.patch(path, json=_patch(*operations))
    assert response.status_code == 200, response.text
    body: Json = response.json()
    return body


def _refused(http: httpx.Client, path: str, status: int, *operations: Json) -> str:
    """The patch is refused with `status` and an OperationOutcome; the resource is unchanged."""
    before = http.get(path).json()
    response = http.patch(path, json=_patch(*operations))
    assert response.status_code == status, response.text
    outcome = response.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert http.get(path).json() == before
    return str(outcome["issue"][0]["diagnostics"])


@pytest.fixture(scope="module")
def http(agent_fhir: httpx.Client) -> httpx.Client:
    return agent_fhir


def test_add_an_element(http: httpx.Client) -> None:
    """R4's first example: path `Patient`, name `birthDate`, valueDate 1930-01-01."""
    pid = _patient(http)
    patched = _applied(
        http, f"/Patient/{pid}", _operation("add", "Patient", name="birthDate", valueDate="1930-01-01")
    )
    assert patched["birthDate"] == "1930-01-01"


def test_add_an_anonymous_type_from_parts(http: httpx.Client) -> None:
    """R4's second example: `Patient.contact` is a BackboneElement, so the value is given as
    parts (here its `name`); contact repeats, so it becomes a list."""
    pid = _patient(http)
    patched = _applied(http, f"/Patient/{pid}", _operation(
        "add", "Patient", name="contact", parts=[{"name": "name", "valueHumanName": {"text": "a name"}}],
    ))  # fmt: skip
    assert patched["contact"] == [{"name": {"text": "a name"}}]


def test_add_into_a_nested_element_selected_by_where(http: httpx.Client) -> None:
    pid = _patient(http, name=[{"use": "official", "family": "Smith"}, {"use": "nickname", "given": ["Bo"]}])
    patched = _applied(
        http,
        f"/Patient/{pid}",
        _operation("add", "Patient.name.where(use = 'official')", name="given", valueString="Ann"),
    )
    assert patched["name"] == [
        {"use": "official", "family": "Smith", "given": ["Ann"]},
        {"use": "nickname", "given": ["Bo"]},
    ]


def test_replace_a_value_found_by_where(http: httpx.Client) -> None:
    pid = _patient(http, identifier=[{"system": "urn:other", "value": "9"}, {"system": MRN, "value": "1"}])
    patched = _applied(
        http,
        f"/Patient/{pid}",
        _operation("replace", f"Patient.identifier.where(system = '{MRN}').value", valueString="2"),
    )
    assert patched["identifier"] == [{"system": "urn:other", "value": "9"}, {"system": MRN, "value": "2"}]


def test_replace_through_indexers(http: httpx.Client) -> None:
    pid = _patient(http, name=[{"family": "Smith", "given": ["Ann", "Marie"]}])
    patched = _applied(
        http, f"/Patient/{pid}", _operation("replace", "Patient.name[0].given[1]", valueString="May")
    )
    assert patched["name"] == [{"family": "Smith", "given": ["Ann", "May"]}]


def test_replace_a_choice_element(http: httpx.Client) -> None:
    """`Observation.value` is value[x]: the path names it without the type; `where` on a
    component's code picks one component."""
    observation = {
        "resourceType": "Observation", "status": "final", "code": {"text": "BP"},
        "component": [
            {"code": {"coding": [{"code": "8480-6"}]}, "valueQuantity": {"value": 120, "unit": "mmHg"}},
            {"code": {"coding": [{"code": "8462-4"}]}, "valueQuantity": {"value": 80, "unit": "mmHg"}},
        ],
    }  # fmt: skip
    oid = http.post("/Observation", json=observation).json()["id"]
    patched = _applied(http, f"/Observation/{oid}", _operation(
        "replace", "Observation.component.where(code.coding.code = '8462-4').value",
        valueQuantity={"value": 85, "unit": "mmHg"},
    ))  # fmt: skip
    assert [c["valueQuantity"]["value"] for c in patched["component"]] == [120, 85]


def test_insert_and_move_within_a_list(http: httpx.Client) -> None:
    """insert: "inserted into the nominated list at the index specified (0 based)"; move: "Move an
    element within a single list"."""
    pid = _patient(http, identifier=[{"value": "a"}, {"value": "b"}])
    path = f"/Patient/{pid}"
    patched = _applied(
        http, path, _operation("insert", "Patient.identifier", index=1, valueIdentifier={"value": "x"})
    )
    assert [i["value"] for i in patched["identifier"]] == ["a", "x", "b"]
    patched = _applied(http, path, _operation("move", "Patient.identifier", source=2, destination=0))
    assert [i["value"] for i in patched["identifier"]] == ["b", "a", "x"]


def test_insert_into_a_list_that_has_no_items(http: httpx.Client) -> None:
    """Index 0 is "equal or less than the number of elements in the list" (none); HAPI reads the
    path as the parent plus the list's name, so an absent list takes its first item."""
    pid = _patient(http)
    patched = _applied(
        http,
        f"/Patient/{pid}",
        _operation("insert", "Patient.telecom", index=0, valueContactPoint={"system": "phone", "value": "1"}),
    )
    assert patched["telecom"] == [{"system": "phone", "value": "1"}]
    _refused(
        http,
        f"/Patient/{pid}",
        422,
        _operation("insert", "Patient.address", index=1, valueAddress={"city": "X"}),
    )


def test_delete_one_element(http: httpx.Client) -> None:
    pid = _patient(
        http,
        telecom=[
            {"system": "phone", "value": "1", "use": "home"},
            {"system": "phone", "value": "2", "use": "work"},
        ],
        contact=[{"name": {"family": "Doe"}, "gender": "female"}],
        birthDate="1970-01-01",
    )
    path = f"/Patient/{pid}"
    patched = _applied(
        http, path,
        _operation("delete", "Patient.telecom.where(use = 'home')"),
        _operation("delete", "Patient.contact[0].name"),
        _operation("delete", "Patient.birthDate"),
    )  # fmt: skip
    assert patched["telecom"] == [{"system": "phone", "value": "2", "use": "work"}]
    assert patched["contact"] == [{"gender": "female"}]
    assert "birthDate" not in patched


def test_delete_of_nothing_is_not_an_error(http: httpx.Client) -> None:
    """ "Path of the element to delete (if found)"."""
    pid = _patient(http, gender="male")
    patched = _applied(http, f"/Patient/{pid}", _operation("delete", "Patient.telecom.where(use = 'home')"))
    assert patched["gender"] == "male" and "telecom" not in patched


def test_a_path_that_selects_more_than_one_element_is_422(http: httpx.Client) -> None:
    pid = _patient(http, identifier=[{"value": "a"}, {"value": "b"}], name=[{"family": "A"}, {"family": "B"}])
    path = f"/Patient/{pid}"
    assert "selects 2 elements" in _refused(
        http, path, 422, _operation("replace", "Patient.identifier.value", valueString="c")
    )
    assert "only one can be deleted" in _refused(http, path, 422, _operation("delete", "Patient.identifier"))
    assert "selects 2" in _refused(
        http, path, 422, _operation("add", "Patient.name", name="given", valueString="X")
    )


def test_a_path_that_selects_nothing_is_422(http: httpx.Client) -> None:
    """ "Except for the delete operation, it is an error if no element matches the specified path";
    a later operation failing undoes the earlier ones (one patch, one write)."""
    pid = _patient(http, name=[{"family": "A"}])
    path = f"/Patient/{pid}"
    diagnostics = _refused(
        http, path, 422,
        _operation("add", "Patient", name="gender", valueCode="female"),
        _operation("replace", "Patient.identifier.where(system = 'urn:none').value", valueString="x"),
    )  # fmt: skip
    assert "no element matches" in diagnostics and "operation 1" in diagnostics
    _refused(http, path, 422, _operation("add", "Patient.contact[3]", name="gender", valueCode="male"))
    _refused(http, path, 422, _operation("move", "Patient.telecom", source=0, destination=1))


def test_a_path_that_is_no_element_is_422(http: httpx.Client) -> None:
    """A computed value (`count()`) or a literal is nothing the patch could change."""
    pid = _patient(http, name=[{"family": "A"}])
    _refused(http, f"/Patient/{pid}", 422, _operation("replace", "Patient.name.count()", valueInteger=3))
    _refused(http, f"/Patient/{pid}", 422, _operation("replace", "'literal'", valueString="x"))


@pytest.mark.parametrize("bad", ["Patient.name.where(", "Patient.name.frobnicate()", "Patient..name", ""])
def test_a_path_that_does_not_parse_is_400(http: httpx.Client, bad: str) -> None:
    pid = _patient(http, name=[{"family": "A"}])
    _refused(http, f"/Patient/{pid}", 400, _operation("replace", bad, valueString="x"))


def test_a_value_of_the_wrong_type_is_refused(http: httpx.Client) -> None:
    """ "Servers SHALL return an error if the type is wrong": the patched resource is validated
    like any write (400 naming the element)."""
    pid = _patient(http)
    response = http.patch(
        f"/Patient/{pid}", json=_patch(_operation("add", "Patient", name="birthDate", valueBoolean=True))
    )
    assert response.status_code == 400, response.text
    assert response.json()["issue"][0]["expression"] == ["Patient.birthDate"]
