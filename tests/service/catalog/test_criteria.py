"""Criteria CRUD exactly as seed 003: the object, typed assertions stored unchanged, 422s by key."""

from __future__ import annotations

import httpx
import pytest

from tests.service.builders import FHIR_BOOKED, PASSES, error, make_benchmark, ok

CRITERION_KEYS = {
    "id",
    "task_id",
    "input_entity_id",
    "label",
    "assertion",
    "weight",
    "axis",
    "required",
    "idle_ok",
    "created_at",
    "updated_at",
}


@pytest.fixture
def task_id(api: httpx.Client) -> str:
    return make_benchmark(api, [[]]).task_ids[0]


def test_crud(api: httpx.Client, task_id: str) -> None:
    body = {
        "task_id": task_id,
        "label": "Appointment booked with correct provider",
        "weight": 1,
        "axis": "correctness",
        "assertion": FHIR_BOOKED,
    }
    created = ok(api.post("/criteria", json=body), 201)
    assert set(created) == CRITERION_KEYS
    assert created["assertion"] == FHIR_BOOKED and created["input_entity_id"] is None
    assert created["id"].startswith("crit_") and len(created["id"]) == 5 + 26
    assert ok(api.get(f"/criteria/{created['id']}")) == created

    voice = {"assert": "voice-transcript", "speaker": "agent", "contains": ["member ID", "date of birth"]}
    patched = ok(
        api.patch(f"/criteria/{created['id']}", json={"assertion": voice, "weight": 0.5, "axis": None})
    )
    assert patched["assertion"] == voice and patched["weight"] == 0.5 and patched["axis"] is None
    assert patched["label"] == created["label"] and patched["updated_at"] >= created["updated_at"]

    listed = ok(api.get("/criteria", params={"task_id": task_id}))
    assert [c["id"] for c in listed["data"]] == [created["id"]]
    assert set(listed["_meta"]) == {"next", "prev", "limit"}
    task = ok(api.get(f"/tasks/{task_id}"))
    assert [c["id"] for c in task["criteria"]] == [created["id"]]

    assert api.delete(f"/criteria/{created['id']}").status_code == 204
    error(api.get(f"/criteria/{created['id']}"), 404, "NOT_FOUND")
    error(api.delete(f"/criteria/{created['id']}"), 404, "NOT_FOUND")


def test_assertion_is_stored_exactly_as_sent(api: httpx.Client, task_id: str) -> None:
    assertion = {
        "assert": "portal-state-match",
        "portal": None,
        "correlate_by": {"resource": "prior_auth_requests", "key": "request_id", "value": "R-1"},
        "assertions": [
            {"path": "status", "expected": "approved"},
            {"path": "patient", "expected": {"member_id": "M1", "tags": [1, 2.5]}},
        ],
    }
    created = ok(
        api.post("/criteria", json={"task_id": task_id, "label": "portal", "assertion": assertion}), 201
    )
    assert created["assertion"] == assertion and created["weight"] == 1
    assert ok(api.get(f"/criteria/{created['id']}"))["assertion"] == assertion


@pytest.mark.parametrize(
    ("assertion", "key"),
    [
        (
            {**FHIR_BOOKED, "fields": [{"path": "status", "expected": "x", "operator": "resembles"}]},
            "assertion.fields.0.operator",
        ),
        ({**PASSES, "mystery": True}, "assertion.mystery"),
        ({"assert": "ehr-magic"}, "assertion.assert"),
        ({"resource_type": "Patient"}, "assertion.assert"),
        ({"assert": "voice-transcript", "contains": "member ID"}, "assertion.contains"),
    ],
)
def test_invalid_assertion_is_a_422_naming_the_key(
    api: httpx.Client, task_id: str, assertion: dict[str, object], key: str
) -> None:
    details = error(
        api.post("/criteria", json={"task_id": task_id, "label": "x", "assertion": assertion}),
        422,
        "VALIDATION_ERROR",
    )
    assert key in details, details


def test_patch_validates_and_keeps_required_fields(api: httpx.Client, task_id: str) -> None:
    created = ok(api.post("/criteria", json={"task_id": task_id, "label": "x", "assertion": PASSES}), 201)
    bad = {**FHIR_BOOKED, "fields": [{"path": "a", "expected": [1, 2], "operator": "equals"}]}
    details = error(api.patch(f"/criteria/{created['id']}", json={"assertion": bad}), 422, "VALIDATION_ERROR")
    assert any(key.startswith("assertion.fields.0") for key in details), details
    assert "label" in error(
        api.patch(f"/criteria/{created['id']}", json={"label": None}), 422, "VALIDATION_ERROR"
    )
    assert "weight" in error(
        api.patch(f"/criteria/{created['id']}", json={"weight": 0}), 422, "VALIDATION_ERROR"
    )
    assert ok(api.get(f"/criteria/{created['id']}"))["assertion"] == PASSES


def test_unknown_task_is_not_found(api: httpx.Client) -> None:
    error(
        api.post("/criteria", json={"task_id": "task_nope", "label": "x", "assertion": PASSES}),
        404,
        "NOT_FOUND",
    )


def test_a_tasks_criteria_page_in_task_order_and_all_criteria_newest_first(
    api: httpx.Client, task_id: str
) -> None:
    ids = [
        ok(api.post("/criteria", json={"task_id": task_id, "label": f"c{i}", "assertion": PASSES}), 201)["id"]
        for i in range(5)
    ]
    seen, cursor, pages = [], None, 0
    while True:
        page = ok(
            api.get(
                "/criteria", params={"task_id": task_id, "limit": 2, **({"cursor": cursor} if cursor else {})}
            )
        )
        assert page["_meta"]["limit"] == 2
        seen += [c["id"] for c in page["data"]]
        pages += 1
        cursor = page["_meta"]["next"]
        if cursor is None:
            break
    assert seen == ids and pages == 3  # the order the task scores and shows them in
    assert page["_meta"]["prev"] is not None
    back = ok(api.get("/criteria", params={"task_id": task_id, "limit": 2, "cursor": page["_meta"]["prev"]}))
    assert [c["id"] for c in back["data"]] == seen[2:4]
    assert [c["id"] for c in ok(api.get("/criteria", params={"limit": 5}))["data"]] == ids[::-1]
    assert ok(api.get("/criteria", params={"task_id": task_id, "limit": 1000}))["_meta"]["limit"] == 100
    assert ok(api.get("/criteria", params={"task_id": task_id, "limit": 0}))["_meta"]["limit"] == 1
