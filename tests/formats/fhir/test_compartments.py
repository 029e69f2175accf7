"""The R4 compartment tables against the R4 search-parameter table: every parameter they name is
a reference parameter of that type that can point at the compartment's type (a typo would
silently leave resources out of `[Compartment]/[id]/[type]` and `$everything`)."""

from __future__ import annotations

import pytest

from assay.formats.fhir.compartments import COMPARTMENTS, DEFINITION, PATIENT_CARE_DATES, PATIENT_COMPARTMENT
from assay.formats.fhir.parameters import is_resource_type, search_parameter


@pytest.mark.parametrize("compartment", sorted(COMPARTMENTS))
def test_every_compartment_parameter_is_a_reference_to_its_owner(compartment: str) -> None:
    for kind, codes in COMPARTMENTS[compartment].items():
        assert is_resource_type(kind), kind
        assert codes, kind
        for code in codes:
            if code == DEFINITION:
                assert kind == compartment, (compartment, kind)  # only the owner's own type
                continue
            parameter = search_parameter(kind, code)
            assert parameter is not None and parameter.type == "reference", (compartment, kind, code)
            assert not parameter.targets or compartment in parameter.targets, (compartment, kind, code)


def test_the_five_r4_compartments() -> None:
    """compartmentdefinition.html: R4 defines exactly these five; membership samples from each."""
    assert set(COMPARTMENTS) == {"Patient", "Encounter", "RelatedPerson", "Practitioner", "Device"}
    assert COMPARTMENTS["Encounter"]["Observation"] == ("encounter",)
    assert COMPARTMENTS["Encounter"]["Encounter"] == (DEFINITION,)
    assert COMPARTMENTS["Practitioner"]["Encounter"] == ("practitioner", "participant")
    assert COMPARTMENTS["Practitioner"]["Patient"] == ("general-practitioner",)
    assert COMPARTMENTS["RelatedPerson"]["Patient"] == ("link",)
    assert COMPARTMENTS["Device"]["Observation"] == ("subject", "device")
    assert "Device" not in COMPARTMENTS["Device"]  # R4 lists Device as never in its own compartment
    assert PATIENT_COMPARTMENT["SupplyRequest"] == ("subject",)


def test_the_clinical_types_agents_read_are_in_it() -> None:
    for kind in ("Condition", "Observation", "Encounter", "MedicationRequest", "Appointment", "Procedure"):
        assert kind in PATIENT_COMPARTMENT


def test_every_care_date_is_a_date_parameter_of_a_patient_compartment_type() -> None:
    for kind, code in PATIENT_CARE_DATES.items():
        assert kind in PATIENT_COMPARTMENT, kind
        parameter = search_parameter(kind, code)
        assert parameter is not None and parameter.type == "date", (kind, code)
