"""The viewer's view models (issue 16): evidence of every check shape becomes expected-vs-actual
rows, and a criterion links to the events its evidence names."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from assay.service.ui.views import EventRow, criterion_event_links, evidence_rows, matched_turns, timeline

FHIR = {
    "fieldResults": [{"path": "start", "expected": "2026-11-10", "actual": "2026-11-11", "passed": False}],
    "resource": "Appointment/a1",
    "candidates": 1,
}
VOICE = {
    "phraseResults": [
        {"phrase": "member ID", "kind": "contains", "found": True, "passed": True, "turn": 2,
         "speaker": "agent", "text": "member identification number", "method": "fuzzy", "similarity": 0.91},
        {"phrase": "SSN", "kind": "not_contains", "found": False, "passed": True, "turn": None,
         "variantsRuledOut": [{"variant": "social security number", "entries": ["ssn"], "replaced": []}]},
        {"phrase": "date of birth", "kind": "contains", "found": True, "passed": True, "turn": 3,
         "speaker": "agent", "text": "DOB", "method": "vocabulary", "similarity": 1.0,
         "vocabulary": {"variant": "dob", "entries": ["date-of-birth"], "replaced": [], "tier": "exact"}},
    ]
}  # fmt: skip
PORTAL = {
    "assertionResults": [
        {"path": "auth_number", "expected": "^A", "actual": "B1", "passed": False, "operator": "matches"}
    ]
}


def event(ident: str, path: str, response: str | None = None, kind: str = "fhir_request") -> EventRow:
    return EventRow(ident, "sb_1", 1, kind, "GET", path, 200, datetime.now(UTC), None, response)


def test_evidence_rows_for_each_shape() -> None:
    (row,) = evidence_rows(FHIR)
    assert (row.field, row.expected, row.actual, row.passed) == ("start", "2026-11-10", "2026-11-11", False)
    said, never, trade = evidence_rows(VOICE)
    assert trade.note == "vocabulary: as “dob” (date-of-birth), similarity 1.0" and "DOB" in trade.actual
    assert never.note == "1 variant in the trade's words ruled out"
    assert (
        said.expected == "said" and "member identification number" in said.actual and "turn 2" in said.actual
    )
    assert never.expected == "never said" and never.actual == "not found" and never.passed
    (portal,) = evidence_rows(PORTAL)
    assert portal.expected == "matches ^A" and portal.actual == "B1"
    assert evidence_rows("not a mapping") == [] and evidence_rows({"x": [1, 2]}) == []


def test_links_by_resource_path_and_body_and_event_id() -> None:
    events = [
        event("evt_1", "/v1/task-runs/t/fhir/Appointment/a1"),
        event("evt_2", "/v1/task-runs/t/fhir/Appointment", '{"resourceType": "Appointment", "id": "a1"}'),
        event("evt_3", "/v1/task-runs/t/fhir/Patient/p1"),
        event("evt_4", "/v1/task-runs/t/hl7/outbound", kind="hl7_outbound"),
    ]
    runs = [
        SimpleNamespace(id="c1", evidence=FHIR),
        SimpleNamespace(id="c2", evidence={"field_results": [], "event_id": "evt_4"}),
        SimpleNamespace(id="c3", evidence=VOICE),
    ]
    assert criterion_event_links(runs, events) == {"c1": ["evt_1", "evt_2"], "c2": ["evt_4"]}


def test_voice_events_become_chat_lines() -> None:
    turns = '[{"speaker": "ivr", "text": "Welcome"}, {"speaker": "agent", "text": "Hi, checking a claim"}]'
    voice = EventRow("evt_9", "sb_2", 1, "voice_turn", "POST", "/voice/turns", 201, None, turns, None)
    items = timeline([voice], {"sb_2": "voice"}, {"evt_9": ["c1"]})
    assert [(item.speaker, item.text) for item in items] == [
        ("ivr", "Welcome"),
        ("agent", "Hi, checking a claim"),
    ]
    assert [item.turn for item in items] == [0, 1]  # as voice evidence counts turns
    evidence = {
        "phraseResults": [{"phrase": "claim", "found": True, "turn": 1}, {"phrase": "x", "found": False}]
    }
    assert matched_turns([SimpleNamespace(evidence=evidence)]) == {1: ["claim"]}


def test_links_by_control_id_row_key_and_file_path() -> None:
    hl7 = EventRow(
        "evt_h",
        "sb_3",
        1,
        "hl7_outbound",
        "POST",
        "/hl7/outbound",
        200,
        None,
        "MSH|^~\\&|A|B|C|D|20260101||ADT^A08|MSG00042|P|2.5",
        "MSH|...|ACK",
    )
    portal = EventRow(
        "evt_p",
        "sb_4",
        1,
        "portal_request",
        "POST",
        "/portal/prior_auth_requests",
        201,
        None,
        None,
        '{"request_id": "PA-3001"}',
    )
    upload = EventRow(
        "evt_f",
        "sb_5",
        1,
        "file_upload",
        "PUT",
        "/files/outbound/referrals/REF-1.json",
        201,
        None,
        None,
        None,
    )
    other = EventRow("evt_o", "sb_5", 2, "file_upload", "PUT", "/files/inbox/x.txt", 201, None, None, None)
    runs = [
        SimpleNamespace(
            id="c1", evidence={"field_results": [], "control_id": "MSG00042", "event_id": "hl7_9"}
        ),
        SimpleNamespace(id="c2", evidence={"assertionResults": [], "row_key": "PA-3001"}),
        SimpleNamespace(
            id="c3", evidence={"fieldResults": [], "matchedPaths": ["outbound/referrals/REF-1.json"]}
        ),
    ]
    links = criterion_event_links(runs, [hl7, portal, upload, other])
    assert links == {"c1": ["evt_h"], "c2": ["evt_p"], "c3": ["evt_f"]}
