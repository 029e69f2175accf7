"""The generated R4 search-parameter table, compiled extractors and strict FHIRPath compile."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import assay.formats.fhir as fhir
from assay.formats.fhir import FhirPathError, FhirStore, compile_fhirpath, search_parameter
from assay.formats.fhir._search_parameters import SEARCH_PARAMETERS
from assay.formats.fhir.extract import compile_extractor, is_translated

ROOT = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_search_parameters", ROOT / "scripts" / "generate_search_parameters.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_table_is_up_to_date() -> None:
    generator = _generator()
    bundle = json.loads((ROOT / "tests" / "fixtures" / "fhir-spec" / "search-parameters.json").read_text())
    expected = generator.render(generator.build(bundle))
    assert (ROOT / "src" / "assay" / "formats" / "fhir" / "_search_parameters.py").read_text() == expected


def test_resolve_is_rewritten_to_a_reference_type_filter() -> None:
    patient = search_parameter("Appointment", "patient")
    assert patient is not None
    assert patient.type == "reference"
    assert patient.targets == ("Patient",)
    assert patient.expression == (
        "Appointment.participant.actor.where(reference.startsWith('Patient/') or "
        "reference.contains('/Patient/') or type = 'Patient')"
    )
    assert not [
        (t, c)
        for t, params in SEARCH_PARAMETERS.items()
        for c, (_, e, _) in params.items()
        if "resolve()" in e
    ]


def test_expressions_are_restricted_to_their_type() -> None:
    code = search_parameter("Observation", "code")
    assert code is not None and code.expression == "Observation.code"


@pytest.mark.parametrize("resource_type", ["Patient", "Appointment", "Observation", "Bundle"])
def test_resource_parameters_apply_to_every_type(resource_type: str) -> None:
    for code in ("_id", "_lastUpdated", "_tag", "_profile", "_security", "_source"):
        parameter = search_parameter(resource_type, code)
        assert parameter is not None
        assert parameter.expression.startswith(f"{resource_type}.")
    assert search_parameter("NotAType", "_id") is None


def test_every_supported_expression_but_one_runs_without_fhirpathpy() -> None:
    fallbacks = [
        (t, c)
        for t, params in SEARCH_PARAMETERS.items()
        if t != "Resource"
        for c, (kind, e, _) in params.items()
        if e and kind not in ("composite", "special") and not is_translated(t, e)
    ]
    assert fallbacks == [("Patient", "deceased")]


def test_choice_types_where_filters_and_fhir_types() -> None:
    observation = {
        "resourceType": "Observation",
        "valueQuantity": {"value": 5, "unit": "mg"},
        "effectivePeriod": {"start": "2020-01-01"},
        "component": [{"valueCodeableConcept": {"coding": [{"code": "x"}]}}],
    }
    quantity = compile_extractor("Observation", "(Observation.value.ofType(Quantity))")(observation)
    assert [(t.value, t.fhir_type) for t in quantity] == [({"value": 5, "unit": "mg"}, "Quantity")]
    assert [
        t.fhir_type for t in compile_extractor("Observation", "Observation.value as Quantity")(observation)
    ] == ["Quantity"]
    effective = compile_extractor("Observation", "Observation.effective")(observation)
    assert [(t.value, t.fhir_type) for t in effective] == [({"start": "2020-01-01"}, "Period")]
    combo = search_parameter("Observation", "combo-value-concept")
    assert combo is not None
    assert [t.fhir_type for t in compile_extractor("Observation", combo.expression)(observation)] == [
        "CodeableConcept"
    ]
    patient = {
        "resourceType": "Patient",
        "telecom": [{"system": "phone", "value": "555"}, {"system": "email", "value": "a@b"}],
    }
    phone = search_parameter("Patient", "phone")
    assert phone is not None
    assert [
        (t.value["value"], t.fhir_type) for t in compile_extractor("Patient", phone.expression)(patient)
    ] == [("555", "ContactPoint")]


def test_reference_type_filter_reads_reference_type_and_absolute_urls() -> None:
    appointment = {
        "resourceType": "Appointment",
        "participant": [
            {"actor": {"reference": "Practitioner/1"}},
            {"actor": {"reference": "http://x.org/fhir/Patient/2"}},
            {"actor": {"type": "Patient", "identifier": {"value": "3"}}},
        ],
    }
    patient = search_parameter("Appointment", "patient")
    assert patient is not None
    found = compile_extractor("Appointment", patient.expression)(appointment)
    assert len(found) == 2
    store = FhirStore([{**appointment, "id": "a"}])
    assert [r["id"] for r in store.search("Appointment", {"patient": "Patient/2"})] == ["a"]
    assert store.search("Appointment", {"patient": "Patient/1"}) == []
    assert [r["id"] for r in store.search("Appointment", {"practitioner": "1"})] == ["a"]


def test_fallback_expression_searches_through_fhirpathpy() -> None:
    store = FhirStore(
        [
            {"resourceType": "Patient", "id": "dead", "deceasedDateTime": "2020-01-01"},
            {"resourceType": "Patient", "id": "alive", "deceasedBoolean": False},
            {"resourceType": "Patient", "id": "unknown"},
        ]
    )
    assert [r["id"] for r in store.search("Patient", {"deceased": "true"})] == ["dead"]
    assert [r["id"] for r in store.search("Patient", {"deceased": "false"})] == ["alive", "unknown"]


# -- FHIRPath -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("Patient.name.where(", "FHIRPath syntax error"),
        ("Patient..name", "FHIRPath syntax error"),
        ("%%%", "FHIRPath syntax error"),
        ("name.frobnicate()", "unknown FHIRPath function frobnicate()"),
        ("name.where()", "FHIRPath function where() takes 1 argument(s), got 0"),
        ("", "empty FHIRPath expression"),
    ],
)
def test_fhirpath_compile_errors(expression: str, message: str) -> None:
    with pytest.raises(FhirPathError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_fhirpath(expression)


def test_fhirpath_is_compiled_once_and_evaluates() -> None:
    first = compile_fhirpath("name.given.first()")
    assert compile_fhirpath("name.given.first()") is first
    assert first({"resourceType": "Patient", "name": [{"given": ["Ann", "Bo"]}]}) == ["Ann"]
    with pytest.raises(FhirPathError, match="FHIRPath evaluation failed"):
        compile_fhirpath("name.given.substring(1)")(
            {"resourceType": "Patient", "name": [{"given": ["a", "b"]}]}
        )


def test_public_names_are_exported() -> None:
    assert fhir.__all__ == sorted(fhir.__all__)
    for name in fhir.__all__:
        assert hasattr(fhir, name), name


def test_fhirpath_number_literal_past_30_digits_is_refused_at_compile() -> None:
    """A 5,000-digit literal compiled, then broke evidence serialization (int→str limit) at verify."""
    with pytest.raises(FhirPathError, match="longer than 30 digits"):
        compile_fhirpath("9" * 5000)
    assert compile_fhirpath("name.where(family = '" + "1" * 40 + "').exists()")({"name": []}) == [False]
