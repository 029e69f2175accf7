"""The R4 compartments (compartmentdefinition.html and the five base CompartmentDefinitions of
FHIR 4.0.1: patient, encounter, relatedPerson, practitioner, device): for each resource type that
can be in a compartment, the search parameters that put it there.

R4 search.html §3.1.1.1.1: `GET [base]/[Compartment]/[id]/[type]?…` searches the resources of
`type` in that compartment — those for which one of these parameters refers to the compartment's
resource — and `Patient/[id]/$everything` (patient-operation-everything.html) returns the whole
Patient compartment. `{def}` (DEFINITION) is R4's mark for the compartment's own resource
(`Encounter/e1/Encounter` is e1). Types not listed are never in that compartment. The tables are
transcribed from the CompartmentDefinitions' `resource.param` lists; `tests/formats/fhir/
test_compartments.py` checks every code against the R4 search-parameter table (a reference
parameter of that type that can point at the compartment's type).
"""

from __future__ import annotations

__all__ = [
    "COMPARTMENTS",
    "DEFINITION",
    "DEVICE_COMPARTMENT",
    "ENCOUNTER_COMPARTMENT",
    "PATIENT_CARE_DATES",
    "PATIENT_COMPARTMENT",
    "PRACTITIONER_COMPARTMENT",
    "RELATED_PERSON_COMPARTMENT",
]

DEFINITION = "{def}"

PATIENT_COMPARTMENT: dict[str, tuple[str, ...]] = {
    "Account": ("subject",),
    "AdverseEvent": ("subject",),
    "AllergyIntolerance": ("patient", "recorder", "asserter"),
    "Appointment": ("actor",),
    "AppointmentResponse": ("actor",),
    "AuditEvent": ("patient",),
    "Basic": ("patient", "author"),
    "BodyStructure": ("patient",),
    "CarePlan": ("patient", "performer"),
    "CareTeam": ("patient", "participant"),
    "ChargeItem": ("subject",),
    "Claim": ("patient", "payee"),
    "ClaimResponse": ("patient",),
    "ClinicalImpression": ("subject",),
    "Communication": ("subject", "sender", "recipient"),
    "CommunicationRequest": ("subject", "sender", "recipient", "requester"),
    "Composition": ("subject", "author", "attester"),
    "Condition": ("patient", "asserter"),
    "Consent": ("patient",),
    "Coverage": ("policy-holder", "subscriber", "beneficiary", "payor"),
    "CoverageEligibilityRequest": ("patient",),
    "CoverageEligibilityResponse": ("patient",),
    "DetectedIssue": ("patient",),
    "DeviceRequest": ("subject", "performer"),
    "DeviceUseStatement": ("subject",),
    "DiagnosticReport": ("subject",),
    "DocumentManifest": ("subject", "author", "recipient"),
    "DocumentReference": ("subject", "author"),
    "Encounter": ("patient",),
    "EnrollmentRequest": ("subject",),
    "EpisodeOfCare": ("patient",),
    "ExplanationOfBenefit": ("patient", "payee"),
    "FamilyMemberHistory": ("patient",),
    "Flag": ("patient",),
    "Goal": ("patient",),
    "Group": ("member",),
    "ImagingStudy": ("patient",),
    "Immunization": ("patient",),
    "ImmunizationEvaluation": ("patient",),
    "ImmunizationRecommendation": ("patient",),
    "Invoice": ("subject", "patient", "recipient"),
    "List": ("subject", "source"),
    "MeasureReport": ("patient",),
    "Media": ("subject",),
    "MedicationAdministration": ("patient", "performer", "subject"),
    "MedicationDispense": ("subject", "patient", "receiver"),
    "MedicationRequest": ("subject",),
    "MedicationStatement": ("subject",),
    "MolecularSequence": ("patient",),
    "NutritionOrder": ("patient",),
    "Observation": ("subject", "performer"),
    "Patient": ("link",),
    "Person": ("patient",),
    "Procedure": ("patient", "performer"),
    "Provenance": ("patient",),
    "QuestionnaireResponse": ("subject", "author"),
    "RelatedPerson": ("patient",),
    "RequestGroup": ("subject", "participant"),
    "ResearchSubject": ("individual",),
    "RiskAssessment": ("subject",),
    "Schedule": ("actor",),
    "ServiceRequest": ("subject", "performer"),
    "Specimen": ("subject",),
    "SupplyDelivery": ("patient",),
    "SupplyRequest": ("subject",),
    "VisionPrescription": ("patient",),
}

ENCOUNTER_COMPARTMENT: dict[str, tuple[str, ...]] = {
    "CarePlan": ("encounter",),
    "CareTeam": ("encounter",),
    "ChargeItem": ("context",),
    "Claim": ("encounter",),
    "ClinicalImpression": ("encounter",),
    "Communication": ("encounter",),
    "CommunicationRequest": ("encounter",),
    "Composition": ("encounter",),
    "Condition": ("encounter",),
    "DeviceRequest": ("encounter",),
    "DiagnosticReport": ("encounter",),
    "DocumentManifest": ("related-ref",),
    "DocumentReference": ("encounter",),
    "Encounter": ("{def}",),
    "ExplanationOfBenefit": ("encounter",),
    "Media": ("encounter",),
    "MedicationAdministration": ("context",),
    "MedicationRequest": ("encounter",),
    "NutritionOrder": ("encounter",),
    "Observation": ("encounter",),
    "Procedure": ("encounter",),
    "QuestionnaireResponse": ("encounter",),
    "RequestGroup": ("encounter",),
    "ServiceRequest": ("encounter",),
    "VisionPrescription": ("encounter",),
}

RELATED_PERSON_COMPARTMENT: dict[str, tuple[str, ...]] = {
    "AdverseEvent": ("recorder",),
    "AllergyIntolerance": ("asserter",),
    "Appointment": ("actor",),
    "AppointmentResponse": ("actor",),
    "Basic": ("author",),
    "CarePlan": ("performer",),
    "CareTeam": ("participant",),
    "ChargeItem": (
        "enterer",
        "performer-actor",
    ),
    "Claim": ("payee",),
    "Communication": (
        "sender",
        "recipient",
    ),
    "CommunicationRequest": (
        "sender",
        "recipient",
        "requester",
    ),
    "Composition": ("author",),
    "Condition": ("asserter",),
    "Coverage": (
        "policy-holder",
        "subscriber",
        "payor",
    ),
    "DocumentManifest": (
        "author",
        "recipient",
    ),
    "DocumentReference": ("author",),
    "Encounter": ("participant",),
    "ExplanationOfBenefit": ("payee",),
    "Invoice": ("recipient",),
    "MedicationAdministration": ("performer",),
    "MedicationStatement": ("source",),
    "Observation": ("performer",),
    "Patient": ("link",),
    "Person": ("link",),
    "Procedure": ("performer",),
    "Provenance": ("agent",),
    "QuestionnaireResponse": (
        "author",
        "source",
    ),
    "RelatedPerson": ("{def}",),
    "RequestGroup": ("participant",),
    "Schedule": ("actor",),
    "ServiceRequest": ("performer",),
    "SupplyRequest": ("requester",),
}

PRACTITIONER_COMPARTMENT: dict[str, tuple[str, ...]] = {
    "Account": ("subject",),
    "AdverseEvent": ("recorder",),
    "AllergyIntolerance": (
        "recorder",
        "asserter",
    ),
    "Appointment": ("actor",),
    "AppointmentResponse": ("actor",),
    "AuditEvent": ("agent",),
    "Basic": ("author",),
    "CarePlan": ("performer",),
    "CareTeam": ("participant",),
    "ChargeItem": (
        "enterer",
        "performer-actor",
    ),
    "Claim": (
        "enterer",
        "provider",
        "payee",
        "care-team",
    ),
    "ClaimResponse": ("requestor",),
    "ClinicalImpression": ("assessor",),
    "Communication": (
        "sender",
        "recipient",
    ),
    "CommunicationRequest": (
        "sender",
        "recipient",
        "requester",
    ),
    "Composition": (
        "subject",
        "author",
        "attester",
    ),
    "Condition": ("asserter",),
    "CoverageEligibilityRequest": (
        "enterer",
        "provider",
    ),
    "CoverageEligibilityResponse": ("requestor",),
    "DetectedIssue": ("author",),
    "DeviceRequest": (
        "requester",
        "performer",
    ),
    "DiagnosticReport": ("performer",),
    "DocumentManifest": (
        "subject",
        "author",
        "recipient",
    ),
    "DocumentReference": (
        "subject",
        "author",
        "authenticator",
    ),
    "Encounter": (
        "practitioner",
        "participant",
    ),
    "EpisodeOfCare": ("care-manager",),
    "ExplanationOfBenefit": (
        "enterer",
        "provider",
        "payee",
        "care-team",
    ),
    "Flag": ("author",),
    "Group": ("member",),
    "Immunization": ("performer",),
    "Invoice": ("participant",),
    "Linkage": ("author",),
    "List": ("source",),
    "Media": (
        "subject",
        "operator",
    ),
    "MedicationAdministration": ("performer",),
    "MedicationDispense": (
        "performer",
        "receiver",
    ),
    "MedicationRequest": ("requester",),
    "MedicationStatement": ("source",),
    "MessageHeader": (
        "receiver",
        "author",
        "responsible",
        "enterer",
    ),
    "NutritionOrder": ("provider",),
    "Observation": ("performer",),
    "Patient": ("general-practitioner",),
    "PaymentNotice": ("provider",),
    "PaymentReconciliation": ("requestor",),
    "Person": ("practitioner",),
    "Practitioner": ("{def}",),
    "PractitionerRole": ("practitioner",),
    "Procedure": ("performer",),
    "Provenance": ("agent",),
    "QuestionnaireResponse": (
        "author",
        "source",
    ),
    "RequestGroup": (
        "participant",
        "author",
    ),
    "ResearchStudy": ("principalinvestigator",),
    "RiskAssessment": ("performer",),
    "Schedule": ("actor",),
    "ServiceRequest": (
        "performer",
        "requester",
    ),
    "Specimen": ("collector",),
    "SupplyDelivery": (
        "supplier",
        "receiver",
    ),
    "SupplyRequest": ("requester",),
    "VisionPrescription": ("prescriber",),
}

DEVICE_COMPARTMENT: dict[str, tuple[str, ...]] = {
    "Account": ("subject",),
    "Appointment": ("actor",),
    "AppointmentResponse": ("actor",),
    "AuditEvent": ("agent",),
    "ChargeItem": (
        "enterer",
        "performer-actor",
    ),
    "Claim": (
        "procedure-udi",
        "item-udi",
        "detail-udi",
        "subdetail-udi",
    ),
    "Communication": (
        "sender",
        "recipient",
    ),
    "CommunicationRequest": (
        "sender",
        "recipient",
    ),
    "Composition": ("author",),
    "DetectedIssue": ("author",),
    "DeviceRequest": (
        "device",
        "subject",
        "requester",
        "performer",
    ),
    "DeviceUseStatement": ("device",),
    "DiagnosticReport": ("subject",),
    "DocumentManifest": (
        "subject",
        "author",
    ),
    "DocumentReference": (
        "subject",
        "author",
    ),
    "ExplanationOfBenefit": (
        "procedure-udi",
        "item-udi",
        "detail-udi",
        "subdetail-udi",
    ),
    "Flag": ("author",),
    "Group": ("member",),
    "Invoice": ("participant",),
    "List": (
        "subject",
        "source",
    ),
    "Media": ("subject",),
    "MedicationAdministration": ("device",),
    "MessageHeader": ("target",),
    "Observation": (
        "subject",
        "device",
    ),
    "Provenance": ("agent",),
    "QuestionnaireResponse": ("author",),
    "RequestGroup": ("author",),
    "RiskAssessment": ("performer",),
    "Schedule": ("actor",),
    "ServiceRequest": (
        "performer",
        "requester",
    ),
    "Specimen": ("subject",),
    "SupplyRequest": ("requester",),
}

COMPARTMENTS: dict[str, dict[str, tuple[str, ...]]] = {
    "Patient": PATIENT_COMPARTMENT,
    "Encounter": ENCOUNTER_COMPARTMENT,
    "RelatedPerson": RELATED_PERSON_COMPARTMENT,
    "Practitioner": PRACTITIONER_COMPARTMENT,
    "Device": DEVICE_COMPARTMENT,
}
"""Compartment type → {member resource type → the parameters that put it in}."""

PATIENT_CARE_DATES: dict[str, str] = {
    # R4's `clinical-date` common parameter (code `date`): the types it is defined on
    **dict.fromkeys(
        (
            "AllergyIntolerance", "CarePlan", "CareTeam", "ClinicalImpression", "Composition", "Consent",
            "DiagnosticReport", "Encounter", "EpisodeOfCare", "FamilyMemberHistory", "Flag",
            "Immunization", "List", "Observation", "Procedure", "RiskAssessment", "SupplyRequest",
        ),
        "date",
    ),
    # types whose own `date` parameter is when the care happened
    **dict.fromkeys(
        (
            "AdverseEvent", "Appointment", "DocumentReference", "ImmunizationEvaluation",
            "ImmunizationRecommendation", "Invoice", "MeasureReport", "ResearchSubject",
        ),
        "date",
    ),
    # the rest: the date parameter of the event, order or record the resource stands for
    "Basic": "created", "ChargeItem": "occurrence", "Claim": "created", "ClaimResponse": "created",
    "Communication": "sent", "CommunicationRequest": "authored", "Condition": "onset-date",
    "CoverageEligibilityRequest": "created", "CoverageEligibilityResponse": "created",
    "DetectedIssue": "identified", "DeviceRequest": "authored-on", "DocumentManifest": "created",
    "ExplanationOfBenefit": "created", "Goal": "start-date", "ImagingStudy": "started",
    "Media": "created", "MedicationAdministration": "effective-time",
    "MedicationDispense": "whenhandedover", "MedicationRequest": "authoredon",
    "MedicationStatement": "effective", "NutritionOrder": "datetime", "Provenance": "recorded",
    "QuestionnaireResponse": "authored", "RequestGroup": "authored", "ServiceRequest": "authored",
    "Specimen": "collected", "VisionPrescription": "datewritten",
}  # fmt: skip
"""Patient-compartment type → the date search parameter that is its care date, which
`Patient/[id]/$everything?start=&end=` filters on (patient-operation-everything.html: "The date
range relates to care dates, not record currency dates"). R4 names no element per type; this
table is ours (docs/decisions/fhir.md). Types not listed (Coverage, Group, Person, …) have no care date
and are never filtered out by it; neither is a resource whose care date is absent."""
