"""The R4 Patient compartment (compartmentdefinition-patient.html, FHIR 4.0.1): for each resource
type that can be in a patient's compartment, the search parameters that put it there.

R4 search.html §3.1.1.1.1: `GET [base]/Patient/[id]/[type]?…` searches the resources of `type` in
that patient's compartment — those for which one of these parameters refers to the patient —
and `Patient/[id]/$everything` (patient-operation-everything.html) returns the whole compartment.
Types not listed are never in it. The parameter codes are checked against the R4 search
parameter table by `tests/formats/fhir/test_compartments.py`.
"""

from __future__ import annotations

__all__ = ["PATIENT_COMPARTMENT"]

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
    "SupplyRequest": ("requester",),
    "VisionPrescription": ("patient",),
}
