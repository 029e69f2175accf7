"""One worked example per assertion form, the single source of the examples authors see.

`docs/assertions.md` shows each of these in a fenced block that a test runs through `verify_task`
against real messages from `tests/fixtures`, and checks that the blocks and this table hold the
same assertions; the OpenAPI document (and the MCP tools, which reuse its schema) lists them as
each model's `examples`. So a path form that is shown anywhere has been parsed and judged.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXAMPLES"]

EXAMPLES: dict[str, tuple[dict[str, Any], ...]] = {
    "fhir-resource-state": (
        {
            "assert": "fhir-resource-state",
            "resource_type": "Patient",
            "search": {"identifier": "urn:oid:1.2.36.146.595.217.0.1|12345"},
            "fields": [
                {"path": "name.0.family", "expected": "Chalmers"},
                {"path": "name.given", "expected": "Jim"},
                {"fhirpath": "telecom.where(use='mobile').value", "expected": "(03) 3410 5613"},
                {"path": "birthDate", "operator": "lessThan", "expected": "1980-01-01"},
                {"path": "gender", "operator": "in", "expected": ["male", "female"]},
            ],
        },
        {
            "assert": "fhir-resource-state",
            "resource_type": "Patient",
            "search": {"_id": "example"},
            "match": "all",
            "fields": [
                {"fhirpath": "name.where(use='official').family", "expected": "Chalmers"},
                {"path": "deceasedBoolean", "operator": "notEquals", "expected": True},
                {
                    "path": "managingOrganization.reference",
                    "operator": "matches",
                    "expected": "^Organization/",
                },
            ],
        },
    ),
    "hl7-structural": (
        {
            "assert": "hl7-structural",
            "correlate_by": {"message_type": "ADT^A01", "control_id": "MSG00001"},
            "fields": [
                {"path": "PID.5.1", "expected": "DOGCOW"},
                {"path": "PID.5", "expected": "DOGCOW^CLARUS^M^III"},
                {"path": "PID.3[2].1", "expected": "123456789"},
                {"path": "PID-11-3", "expected": "GREENSBORO"},
                {"path": "PID.7", "operator": "lessThan", "expected": "19700101"},
                {"path": "PV1.7.2", "expected": "ATTEND"},
            ],
        },
        {
            "assert": "hl7-structural",
            "correlate_by": {"PID.3.1": "PATID1234"},
            "fields": [{"path": "EVN.1", "expected": "A08"}],
        },
    ),
    "x12-response": (
        {
            "assert": "x12-response",
            "transaction": "271",
            "correlate_by": {"member_id": "123456789"},
            "fields": [
                {"path": "2100C/NM1[IL]09", "expected": "123456789"},
                {"path": "2110C/EB[#1]01", "expected": "1"},
                {"path": "2110C/EB[1]05", "expected": "GOLD 123 PLAN"},
                {"path": "2110C/EB[B]07", "expected": 10},
                {"path": "2110C/EB[B][#2]07", "expected": 30},
                {"path": "2110C/EB[#3]03~2", "expected": "33"},
                {"path": "TRN02", "expected": "93175-012547"},
            ],
        },
        {
            "assert": "x12-response",
            "transaction": "278",
            "fields": [
                {"path": "2010A/NM1[X3]03", "expected": "NYSDOH"},
                {"path": "2000E/UM01", "expected": "HS"},
                {"path": "2000F/HCR01", "expected": "A1"},
                {"path": "SV1[HC]01-2", "expected": "A4927"},
                {"path": "SV101-3", "expected": "RT"},
            ],
        },
    ),
    "portal-state-match": (
        {
            "assert": "portal-state-match",
            "portal": "acme",
            "correlate_by": {"resource": "prior_auth_requests", "key": "procedure_code", "value": "93306"},
            "assertions": [
                {"path": "patient.member_id", "expected": "M123456"},
                {"path": "status", "operator": "in", "expected": ["approved", "pended"]},
                {"path": "diagnosis_codes", "expected": ["R07.89"]},
                {"path": "diagnosis_codes.0", "expected": "R07.89"},
            ],
        },
        {
            "assert": "portal-state-match",
            "correlate_by": {"resource": "prior_auth_requests", "key": "member_id"},
            "assertions": [{"path": "status", "expected": "approved"}],
        },
    ),
    "sftp-file-present": (
        {
            "assert": "sftp-file-present",
            "path_pattern": "outbox/**/*.csv",
            "fields": [
                {"key": "name", "expected": "ReportingExample.csv"},
                {"key": "size", "operator": "greaterThan", "expected": 0},
                {"key": "content_type", "expected": "text/csv"},
            ],
        },
        {
            "assert": "sftp-file-present",
            "path": "outbox/patient.json",
            "parse_json": True,
            "fields": [
                {"path": "LastName", "expected": "Smith"},
                {"path": "Phone Number.1", "expected": "1234-5679"},
                {"path": "DOB", "operator": "greaterOrEqual", "expected": "20000101"},
            ],
        },
    ),
    "voice-transcript": (
        {
            "assert": "voice-transcript",
            "speaker": "agent",
            "contains": ["when did your pain begin", "do you have any children"],
            "not_contains": ["social security number"],
        },
        {
            "assert": "voice-transcript",
            "speaker": "caller",
            "contains": ["I have had low back pain for about eight years"],
            "tiers": ["exact", "fuzzy"],
        },
        {
            "assert": "voice-transcript",
            "speaker": "caller",
            "contains": ["low back pain for about ten years"],
        },
    ),
    "voice-call": (
        {
            "assert": "voice-call",
            "reached": "rep",
            "verified_before_asking": True,
            "reference_captured_in": [{"surface": "portal", "resource": "call_notes"}],
        },
    ),
    "no-unexpected-changes": (
        {
            "assert": "no-unexpected-changes",
            "surfaces": ["fhir"],
            "allow": [{"resourceType": "Patient", "change": "updated", "search": {"_id": "example"}}],
        },
        {"assert": "no-unexpected-changes", "surfaces": ["fhir"]},
    ),
    "natural-language": (
        {
            "assert": "natural-language",
            "text": "The agent confirmed the member's date of birth before giving out benefits.",
        },
    ),
}
"""Examples by `assert` tag, in the order the reference shows them."""
