"""The Patient compartment table against the R4 search-parameter table: every parameter it names
is a reference parameter of that type that can point at a Patient (a typo would silently leave
resources out of `Patient/[id]/[type]` and `$everything`)."""

from __future__ import annotations

from assay.formats.fhir.compartments import PATIENT_COMPARTMENT
from assay.formats.fhir.parameters import is_resource_type, search_parameter


def test_every_compartment_parameter_is_a_reference_to_patient() -> None:
    for kind, codes in PATIENT_COMPARTMENT.items():
        assert is_resource_type(kind), kind
        for code in codes:
            parameter = search_parameter(kind, code)
            assert parameter is not None and parameter.type == "reference", (kind, code)
            assert not parameter.targets or "Patient" in parameter.targets, (kind, code)


def test_the_clinical_types_agents_read_are_in_it() -> None:
    for kind in ("Condition", "Observation", "Encounter", "MedicationRequest", "Appointment", "Procedure"):
        assert kind in PATIENT_COMPARTMENT
