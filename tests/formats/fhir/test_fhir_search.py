"""FHIR R4 search over the 18 bundled Synthea files and hand-made resources (SPEC §3.2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.conftest import FIXTURES

from assay.formats.fhir import FhirStore, InvalidSearch, UnknownSearchParameter, resources_from_bundle

SYNTHEA = FIXTURES / "fhir" / "synthea"
ALFREDA = "6d23a95e-7e18-4201-90ec-9501fa89fbd2"
"""Alfreda Wyman, smart-2019 (born 1980-10-28, Wilmington)."""
GUSTAVO = "cdf500b9-7cc4-424d-a86c-a18e6620d6e7"
"""Gustavo Mejía: an accented family name."""


@pytest.fixture(scope="module")
def store() -> FhirStore:
    resources: list[dict[str, Any]] = []
    for path in sorted(SYNTHEA.glob("*/*.json")):
        resources.extend(resources_from_bundle(json.loads(path.read_text(encoding="utf-8"))))
    assert len(list(SYNTHEA.glob("*/*.json"))) == 18
    return FhirStore(resources)


def ids(resources: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in resources]


# -- string -------------------------------------------------------------------------------------


def test_patient_by_family_name_and_birthdate(store: FhirStore) -> None:
    assert ids(store.search("Patient", {"family": "Wyman", "birthdate": "1980-10-28"})) == [ALFREDA]
    assert store.search("Patient", {"family": "Wyman", "birthdate": "1981"}) == []


def test_string_is_a_case_and_accent_insensitive_prefix_on_any_name_part(store: FhirStore) -> None:
    assert ids(store.search("Patient", {"family": "mejia"})) == [GUSTAVO]
    assert ids(store.search("Patient", {"name": "ALFR"})) == [ALFREDA]
    assert ids(store.search("Patient", {"address-city": "wilm", "gender": "female"})) == [ALFREDA]
    assert store.search("Patient", {"family": "yman"}) == []


def test_string_exact_and_contains(store: FhirStore) -> None:
    assert ids(store.search("Patient", {"family:exact": "Mejía"})) == [GUSTAVO]
    assert store.search("Patient", {"family:exact": "mejía"}) == []
    assert ids(store.search("Patient", {"family:contains": "YMA"})) == [ALFREDA]


# -- token and reference ------------------------------------------------------------------------


def test_observations_by_loinc_code_and_subject(store: FhirStore) -> None:
    heights = store.search(
        "Observation", {"subject": f"Patient/{ALFREDA}", "code": "http://loinc.org|8302-2"}
    )
    assert len(heights) == 5
    assert all(o["code"]["coding"][0]["code"] == "8302-2" for o in heights)
    assert ids(store.search("Observation", {"patient": ALFREDA, "code": "8302-2"})) == ids(heights)
    assert (
        store.search(
            "Observation", {"subject": f"Patient/{ALFREDA}", "code": "http://snomed.info/sct|8302-2"}
        )
        == []
    )
    assert store.search("Observation", {"subject": f"Patient/{ALFREDA}", "code": "|8302-2"}) == []


def test_token_or_values_and_system_only(store: FhirStore) -> None:
    either = store.search("Observation", {"patient": ALFREDA, "code": "8302-2,29463-7"})
    assert len(either) == 10
    loinc = store.search("Observation", {"patient": ALFREDA, "code": "http://loinc.org|"})
    assert len(loinc) == len(store.search("Observation", {"patient": ALFREDA}))


def test_token_codes_are_case_sensitive(store: FhirStore) -> None:
    assert store.search("Patient", {"gender": "FEMALE"}) == []
    assert len(store.search("Patient", {"gender": "female"})) == 5


def test_reference_forms(store: FhirStore) -> None:
    typed = store.search("Encounter", {"subject": f"Patient/{ALFREDA}"})
    assert len(typed) == 8
    assert ids(store.search("Encounter", {"subject": ALFREDA})) == ids(typed)
    assert ids(store.search("Encounter", {"subject:Patient": ALFREDA})) == ids(typed)
    assert store.search("Encounter", {"subject:Group": ALFREDA}) == []
    absolute = f"https://ehr.example.org/fhir/Patient/{ALFREDA}"
    assert ids(store.search("Encounter", {"subject": absolute})) == ids(typed)


def test_id_and_and_semantics_of_a_repeated_parameter(store: FhirStore) -> None:
    assert ids(store.search("Patient", {"_id": ALFREDA})) == [ALFREDA]
    assert len(store.search("Patient", {"_id": f"{ALFREDA},{GUSTAVO}"})) == 2
    assert store.search("Patient", {"_id": [ALFREDA, GUSTAVO]}) == []


def test_not_includes_resources_without_the_element(store: FhirStore) -> None:
    resources = [
        {"resourceType": "Patient", "id": "a", "gender": "female"},
        {"resourceType": "Patient", "id": "b", "gender": "male"},
        {"resourceType": "Patient", "id": "c"},
    ]
    small = FhirStore(resources)
    assert ids(small.search("Patient", {"gender:not": "male"})) == ["a", "c"]
    assert ids(small.search("Patient", {"gender:missing": "true"})) == ["c"]
    assert ids(small.search("Patient", {"gender:missing": "false"})) == ["a", "b"]
    assert len(store.search("Patient", {"deceased:not": "true"})) == 14


def test_missing_on_synthea(store: FhirStore) -> None:
    deceased = store.search("Patient", {"death-date:missing": "false"})
    assert {p["name"][0]["family"] for p in deceased} == {"Thompson"}
    assert len(store.search("Patient", {"death-date:missing": "true"})) == 14


# -- dates --------------------------------------------------------------------------------------


def test_encounters_in_a_date_range(store: FhirStore) -> None:
    found = store.search("Encounter", {"patient": ALFREDA, "date": ["ge2012-01-01", "lt2013-01-01"]})
    assert sorted(e["period"]["start"][:10] for e in found) == ["2012-03-06", "2012-11-15", "2012-11-20"]
    assert store.search("Encounter", {"patient": ALFREDA, "date": "2012-11"}) != []
    assert len(store.search("Encounter", {"patient": ALFREDA, "date": "eq2012-11"})) == 2


def test_open_period_end_is_infinite() -> None:
    open_ended = {"resourceType": "Encounter", "id": "open", "period": {"start": "2020-01-01"}}
    closed = {
        "resourceType": "Encounter",
        "id": "closed",
        "period": {"start": "2020-01-01", "end": "2020-01-02"},
    }
    small = FhirStore([open_ended, closed])
    assert ids(small.search("Encounter", {"date": "gt2030-01-01"})) == ["open"]
    assert ids(small.search("Encounter", {"date": "eq2020"})) == ["closed"]
    assert ids(small.search("Encounter", {"date": "sa2019-12-31"})) == ["closed", "open"]


def test_missing_time_zone_is_utc() -> None:
    local = {"resourceType": "Observation", "id": "o", "effectiveDateTime": "2021-03-04T23:30:00+02:00"}
    small = FhirStore([local])
    assert ids(small.search("Observation", {"date": "2021-03-04T21:30:00"})) == ["o"]
    assert small.search("Observation", {"date": "2021-03-04T23:30:00"}) == []


def test_bad_date_and_bad_prefix_are_invalid_searches(store: FhirStore) -> None:
    with pytest.raises(InvalidSearch, match="invalid date '2021-13-01'"):
        store.search("Encounter", {"date": "2021-13-01"})
    with pytest.raises(InvalidSearch, match="invalid prefix 'xx'"):
        store.search("Encounter", {"date": "xx2021"})
    with pytest.raises(InvalidSearch, match="_count"):
        store.search("Encounter", {"_count": "many"})


# -- quantity and number ------------------------------------------------------------------------


def test_quantity_with_implicit_precision_and_units(store: FhirStore) -> None:
    heights = store.search("Observation", {"patient": ALFREDA, "code": "8302-2"})
    value = heights[0]["valueQuantity"]["value"]
    whole = round(value)
    assert heights[0]["id"] in ids(
        store.search("Observation", {"patient": ALFREDA, "value-quantity": f"{whole}"})
    )
    unit = f"{whole}|http://unitsofmeasure.org|cm"
    assert heights[0]["id"] in ids(store.search("Observation", {"patient": ALFREDA, "value-quantity": unit}))
    assert (
        store.search("Observation", {"patient": ALFREDA, "value-quantity": f"{whole}||kg", "code": "8302-2"})
        == []
    )
    tall = store.search("Observation", {"patient": ALFREDA, "code": "8302-2", "value-quantity": "gt100"})
    assert len(tall) == 5


def test_number_prefixes() -> None:
    small = FhirStore(
        [
            {"resourceType": "RiskAssessment", "id": "low", "prediction": [{"probabilityDecimal": 0.1}]},
            {"resourceType": "RiskAssessment", "id": "high", "prediction": [{"probabilityDecimal": 0.84}]},
        ]
    )
    assert ids(small.search("RiskAssessment", {"probability": "0.8"})) == ["high"]
    assert small.search("RiskAssessment", {"probability": "0.80"}) == []
    assert ids(small.search("RiskAssessment", {"probability": "gt0.5"})) == ["high"]
    assert ids(small.search("RiskAssessment", {"probability": "le0.1"})) == ["low"]


# -- order, _sort, _count -----------------------------------------------------------------------


def test_recency_order_is_last_updated_then_version_then_id() -> None:
    resources = [
        {
            "resourceType": "Patient",
            "id": "b",
            "meta": {"lastUpdated": "2024-01-01T00:00:00Z", "versionId": "10"},
        },
        {
            "resourceType": "Patient",
            "id": "a",
            "meta": {"lastUpdated": "2024-01-01T00:00:00Z", "versionId": "9"},
        },
        {"resourceType": "Patient", "id": "c", "meta": {"lastUpdated": "2023-01-01T00:00:00Z"}},
        {"resourceType": "Patient", "id": "d"},
    ]
    small = FhirStore(resources, loaded_at=datetime(2025, 1, 1, tzinfo=UTC))
    assert ids(small.search("Patient", {})) == ["c", "a", "b", "d"]
    assert ids(small.search("Patient", {"_lastUpdated": "ge2025-01-01"})) == ["d"]


def test_sort_and_count(store: FhirStore) -> None:
    oldest = store.search("Patient", {"_sort": "birthdate", "_count": "2"})
    assert [p["birthDate"] for p in oldest] == ["1939-01-27", "1972-03-30"]
    youngest = store.search("Patient", {"_sort": "-birthdate", "_count": "1"})
    assert youngest[0]["birthDate"] == "2020-10-20"
    by_name = store.search("Patient", {"_sort": "family,-birthdate", "family": "Thompson"})
    assert [p["name"][0]["given"][0] for p in by_name] == ["Garrett", "Chet"]
    assert store.search("Patient", {"_count": "0"}) == []


def test_include_is_accepted_and_never_a_candidate(store: FhirStore) -> None:
    found = store.search("Encounter", {"patient": ALFREDA, "_include": "Encounter:patient"})
    assert {r["resourceType"] for r in found} == {"Encounter"}


# -- unsupported --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "nonsense",
        "subject.name",
        "subject:Patient.name",
        "_has:Observation:nope:code",
        "_has:Observation:patient:shoe-size",
        "family:text",
        "_text",
        "_content",
    ],
)
def test_unknown_or_unsupported_parameters(store: FhirStore, key: str) -> None:
    resource_type = "Observation" if "code-value" in key else "Patient"
    with pytest.raises(UnknownSearchParameter) as caught:
        store.search(resource_type, {key: "x"})
    assert str(caught.value) == f"unknown search parameter {key}"


def test_sort_on_an_unknown_parameter(store: FhirStore) -> None:
    with pytest.raises(UnknownSearchParameter, match="unknown search parameter shoe-size"):
        store.search("Patient", {"_sort": "-shoe-size"})


# -- put and delete -----------------------------------------------------------------------------


def test_put_and_delete_keep_indexes_consistent() -> None:
    small = FhirStore([{"resourceType": "Patient", "id": "p", "name": [{"family": "Old"}], "gender": "male"}])
    assert ids(small.search("Patient", {"family": "old", "gender": "male"})) == ["p"]
    small.put({"resourceType": "Patient", "id": "p", "name": [{"family": "New"}], "gender": "female"})
    assert small.search("Patient", {"family": "old"}) == []
    assert small.search("Patient", {"gender": "male"}) == []
    assert ids(small.search("Patient", {"family": "new", "gender": "female"})) == ["p"]
    small.put({"resourceType": "Patient", "id": "q", "name": [{"family": "Newton"}]})
    assert ids(small.search("Patient", {"family": "new"})) == ["p", "q"]
    assert small.delete("Patient", "p")
    assert not small.delete("Patient", "p")
    assert ids(small.search("Patient", {"family": "new"})) == ["q"]
    assert small.get("Patient", "p") is None
    assert small.get("Patient", "q") is not None


def test_sort_follows_a_put_that_changes_the_sorted_value() -> None:
    """`_sort` keys are kept per resource between searches; a replacement must not sort by the old one."""
    small = FhirStore(
        [
            {"resourceType": "Patient", "id": "a", "birthDate": "1950-01-01"},
            {"resourceType": "Patient", "id": "b", "birthDate": "1960-01-01"},
        ]
    )
    assert ids(small.search("Patient", {"_sort": "birthdate"})) == ["a", "b"]
    assert ids(small.search("Patient", {"_sort": "-birthdate"})) == ["b", "a"]
    small.put({"resourceType": "Patient", "id": "a", "birthDate": "1970-01-01"})
    assert ids(small.search("Patient", {"_sort": "birthdate"})) == ["b", "a"]
    assert ids(small.search("Patient", {"_sort": "-birthdate"})) == ["a", "b"]
    small.put({"resourceType": "Patient", "id": "b"})
    assert ids(small.search("Patient", {"_sort": "birthdate"})) == ["a", "b"]
