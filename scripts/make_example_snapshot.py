"""Build `examples/referral-intake/snapshot` with assay's own snapshot writer.

The data is made up for the example, except the X12 270/271 pair, which is LinuxForHealth/x12
sample data (Apache-2.0; see tests/fixtures/SOURCES.md). Run: `uv run python scripts/make_example_snapshot.py`.
"""

import json
from pathlib import Path

from assay.core.state import Hl7Record, PortalRow, VoiceTurn, X12Record
from assay.snapshot import SnapshotFile, write_snapshot

REPO = Path(__file__).resolve().parent.parent
root = REPO / "examples/referral-intake"
fx = REPO / "tests/fixtures/x12/linuxforhealth"
patient = {
    "resourceType": "Patient",
    "id": "john-smith",
    "meta": {"versionId": "1", "lastUpdated": "2026-11-02T09:00:00.000Z"},
    "identifier": [{"system": "urn:oid:2.16.840.1.113883.4.1", "value": "123456789"}],
    "name": [{"use": "official", "family": "Smith", "given": ["John"]}],
    "gender": "male",
    "birthDate": "1963-05-19",
}
practitioner = {
    "resourceType": "Practitioner",
    "id": "dr-rivera",
    "meta": {"versionId": "1", "lastUpdated": "2026-11-02T09:00:00.000Z"},
    "name": [{"family": "Rivera", "given": ["Ana"], "prefix": ["Dr."]}],
}
appointment = {
    "resourceType": "Appointment",
    "id": "appt-1001",
    "meta": {"versionId": "2", "lastUpdated": "2026-11-03T14:22:05.120Z"},
    "status": "booked",
    "serviceType": [
        {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/service-type",
                    "code": "124",
                    "display": "General Practice",
                }
            ]
        }
    ],
    "start": "2026-11-10T15:00:00Z",
    "end": "2026-11-10T15:30:00Z",
    "participant": [
        {"actor": {"reference": "Practitioner/dr-rivera", "display": "Dr. Rivera"}, "status": "accepted"},
        {"actor": {"reference": "Patient/john-smith", "display": "John Smith"}, "status": "accepted"},
    ],
}
adt = (
    "MSH|^~\\&|ASSAY_AGENT|CLINIC|ADT_RECV|HOSPITAL|20261103142210||ADT^A04^ADT_A01|MSG00042|P|2.5.1\r"
    "EVN|A04|20261103142210\r"
    "PID|1||123456789^^^HOSP^MR~JS-77^^^CLINIC^PI||SMITH^JOHN^Q||19630519|M|||15197 BROADWAY AVENUE^APT 215^KANSAS CITY^MO^64108\r"
    "PV1|1|O|CLINIC^^^MAIN||||1234^RIVERA^ANA^^^DR\r"
)
write_snapshot(
    root / "snapshot",
    manifest={
        "task_run_id": None,
        "captured_at": "2026-11-03T14:30:00.000Z",
        "input_entity": {"member_id": "123456789", "name": "John Smith"},
    },
    fhir=[patient, practitioner, appointment],
    hl7=[Hl7Record(1, adt, "evt_01JC0000000000000000000001", "2026-11-03T14:22:10.000Z")],
    x12=[
        X12Record(
            1,
            (fx / "271_005010X279A1/subscriber-health-benefit-check.271").read_text(),
            (fx / "270_005010X279A1/subscriber-health-benefit-check.270").read_text(),
            "x12_01JC0000000000000000000001",
            "2026-11-03T14:10:00.000Z",
        )
    ],
    portal=[
        PortalRow(
            0,
            "prior_auth_requests",
            {
                "request_id": "PA-3001",
                "patient": {"member_id": "123456789", "name": "John Smith", "birth_date": "1963-05-19"},
                "provider": {"npi": "1234567893", "name": "Ana Rivera"},
                "procedure_code": "97110",
                "diagnosis_codes": ["M54.5"],
                "service_date": "2026-11-10",
                "status": "approved",
                "reason": None,
                "auth_number": "AUTH-88121",
                "submitted_at": "2026-11-03T14:15:00.000Z",
                "updated_at": "2026-11-03T14:15:00.000Z",
            },
        )
    ],
    files=[
        SnapshotFile(
            "outbound/referrals/REF-1001.json",
            json.dumps(
                {
                    "referral_id": "REF-1001",
                    "patient": {"member_id": "123456789", "last_name": "Smith"},
                    "appointment": "Appointment/appt-1001",
                    "diagnosis_codes": ["M54.5"],
                },
                indent=2,
            ).encode(),
            uploaded_at="2026-11-03T14:25:00.000Z",
            content_type="application/json",
        )
    ],
    voice=[
        VoiceTurn("ivr", "Thank you for calling Acme Health provider services.", 0, 2500),
        VoiceTurn(
            "agent",
            "Hi, I'm calling to verify eligibility. The member ID is 123456789 and the date of birth is May 19, 1963.",
            2600,
            9000,
        ),
        VoiceTurn(
            "caller",
            "Thanks. The member is active on the Gold 123 plan; the office visit copay is $10.",
            9100,
            14000,
        ),
        VoiceTurn(
            "agent",
            "Great, thank you. Can you confirm prior authorization is required for physical therapy?",
            14100,
            18000,
        ),
        VoiceTurn("caller", "Yes, prior authorization is required for physical therapy.", 18100, 21000),
    ],
)
print("ok")
