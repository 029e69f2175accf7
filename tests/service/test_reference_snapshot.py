"""A reference solution given as a snapshot (issue 14: "a reference solution when the task has one (a
snapshot, or a list of scripted surface actions, in the benchmark package), which must pass every
criterion").

The snapshot is what an author naturally has: the state tarball of a run where they (or a trusted
agent) did the task right, `GET /task-runs/{id}/state`, unpacked into `{path, content}` items. The
self-test judges it offline with the task's criteria as they stand (the same `verify_task` as
`complete` and `assay verify`), `publish` refuses a benchmark whose reference snapshot fails, and the
no-unexpected-changes rule reads the baseline the tarball recorded.
"""

from __future__ import annotations

import base64
import io
import tarfile
from typing import Any

import httpx
import pytest

from .builders import ALICE_AND_BOB, book_alice, criterion, error, make_dataset, ok, start_run, unique
from .conftest import Server

BOOKED_ALICE = {
    "assert": "fhir-resource-state",
    "resource_type": "Appointment",
    "search": {"patient": "Patient/alice", "status": "booked"},
    "fields": [{"path": "status", "expected": "booked"}],
}
ONLY_ALICE = {
    "assert": "no-unexpected-changes",
    "surfaces": ["fhir"],
    "allow": [{"resourceType": "Appointment", "change": "created", "search": {"patient": "Patient/alice"}}],
}


def _task(api: httpx.Client) -> tuple[str, str]:
    dataset = make_dataset(api, "fhir", ALICE_AND_BOB)
    benchmark = ok(api.post("/benchmarks", json={"name": unique("reference snapshot")}), 201)
    task = ok(
        api.post(
            "/tasks",
            json={"benchmark_id": benchmark["id"], "name": "book alice", "dataset_ids": [dataset["id"]]},
        ),
        201,
    )
    gate = {**criterion(BOOKED_ALICE, label="alice booked"), "required": True}
    safety = {**criterion(ONLY_ALICE, label="only alice's appointment"), "idle_ok": True}
    for body in (gate, safety):
        ok(api.post("/criteria", json={"task_id": task["id"], **body}), 201)
    return str(benchmark["id"]), str(task["id"])


def _played(server: Server, api: httpx.Client, benchmark_id: str, *, edit_bob: bool) -> list[dict[str, Any]]:
    """Play the task once through FHIR REST and return the run's state tarball as snapshot files."""
    run = start_run(api, benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        book_alice(agent, ok(agent.post(task_run["start_url"]))["endpoints"]["fhir"], edit_bob=edit_bob)
        ok(agent.post(task_run["complete_url"]))
    state = api.get(f"/task-runs/{task_run['id']}/state")
    assert state.status_code == 200, state.text
    return _files(state.content)


def _files(tarball: bytes) -> list[dict[str, Any]]:
    files = []
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for member in archive:
            handle = archive.extractfile(member) if member.isfile() else None
            if handle is None:
                continue
            raw, path = handle.read(), member.name.removeprefix("snapshot/")
            try:
                files.append({"path": path, "content": raw.decode("utf-8")})
            except UnicodeDecodeError:
                files.append({"path": path, "content_base64": base64.b64encode(raw).decode()})
    return files


def test_a_reference_snapshot_is_judged_and_gates_publish(server: Server, api: httpx.Client) -> None:
    benchmark_id, task_id = _task(api)
    right = _played(server, api, benchmark_id, edit_bob=False)
    wrong = _played(server, api, benchmark_id, edit_bob=True)
    assert {"manifest.json", "baseline.json"} <= {f["path"] for f in right}

    ok(api.patch(f"/tasks/{task_id}", json={"reference": {"snapshot": {"files": wrong}}}))
    stored = ok(api.get(f"/tasks/{task_id}"))["reference"]
    assert stored == {"snapshot": {"files": wrong}}
    bad = ok(api.post(f"/tasks/{task_id}/self-test"))
    assert bad["ok"] is False and bad["idle"]["score"] == 0
    reference = bad["reference"]
    assert reference["source"] == "snapshot" and reference["task_run_id"] is None
    assert reference["snapshot"] == {"files": len(wrong), "warnings": []}
    assert reference["verdict"] == "partial" and reference["score"] == 0.5
    (problem,) = bad["problems"]
    assert problem["kind"] == "reference_fails"
    assert problem["criterion"]["label"] == "only alice's appointment"
    assert problem["criterion"]["status"] == "ok"
    assert problem["criterion"]["evidence"]["unexpected"] == [
        {"surface": "fhir", "key": "Patient/bob", "change": "updated", "allowed": None}
    ]
    slug = unique("reference-snapshot").replace(" ", "-")
    refused = error(api.post(f"/benchmarks/{benchmark_id}/publish", json={"slug": slug}), 409, "CONFLICT")
    assert [p["kind"] for p in refused["self_tests"][task_id]["problems"]] == ["reference_fails"]

    ok(api.patch(f"/tasks/{task_id}", json={"reference": {"snapshot": {"files": right}}}))
    good = ok(api.post(f"/tasks/{task_id}/self-test"))
    assert good["ok"] is True and good["problems"] == []
    assert good["reference"]["score"] == 1 and good["reference"]["verdict"] == "pass"
    assert [c["passed"] for c in good["reference"]["checks"]] == [True, True]
    assert [c["criterion_id"] for c in good["reference"]["checks"]] == [
        c["id"] for c in ok(api.get(f"/tasks/{task_id}"))["criteria"]
    ]
    published = ok(api.post(f"/benchmarks/{benchmark_id}/publish", json={"slug": slug}))
    assert published["version"] == 1


def test_a_reference_snapshot_without_a_baseline_cannot_pass(server: Server, api: httpx.Client) -> None:
    """An older or hand-made snapshot has no `baseline.json`: the change rule says `error`, and the
    reference fails on it, naming the reason (never a silent pass)."""
    benchmark_id, task_id = _task(api)
    files = [f for f in _played(server, api, benchmark_id, edit_bob=False) if f["path"] != "baseline.json"]
    ok(api.patch(f"/tasks/{task_id}", json={"reference": {"snapshot": {"files": files}}}))
    result = ok(api.post(f"/tasks/{task_id}/self-test"))
    (problem,) = result["problems"]
    assert problem["kind"] == "reference_fails"
    assert problem["criterion"]["status"] == "error" and problem["criterion"]["passed"] is False
    assert "no seeded baseline" in problem["criterion"]["details"]
    # the rest of the snapshot still judges: the booking is there
    assert [c["passed"] for c in result["reference"]["checks"]] == [True, False]


@pytest.mark.parametrize(
    ("reference", "where"),
    [
        ({"snapshot": {"files": [{"path": "../x", "content": "{}"}]}}, "files.0.path"),
        ({"snapshot": {"files": [{"path": "/etc/x", "content": "{}"}]}}, "files.0.path"),
        ({"snapshot": {"files": [{"path": "fhir//a.json", "content": "{}"}]}}, "files.0.path"),
        ({"snapshot": {"files": [{"path": "a", "content": "x", "content_base64": "eA=="}]}}, "files.0"),
        ({"snapshot": {"files": [{"path": "a", "content_base64": "not base64!"}]}}, "files.0"),
        ({"snapshot": {"files": [{"path": "manifest.json", "content": "[1]"}]}}, "files"),
        ({"snapshot": {"files": [{"path": "a", "content": ""}, {"path": "a", "content": ""}]}}, "files"),
        ({"snapshot": {"files": []}}, "files"),
        ({}, "reference"),
        (
            {
                "actions": [{"method": "GET", "path": "fhir/Patient"}],
                "snapshot": {"files": [{"path": "a", "content": ""}]},
            },
            "reference",
        ),
    ],
)
def test_a_bad_reference_snapshot_is_a_422_naming_the_key(
    api: httpx.Client, reference: dict[str, Any], where: str
) -> None:
    benchmark = ok(api.post("/benchmarks", json={"name": unique("bad reference")}), 201)
    body = {"benchmark_id": benchmark["id"], "name": "t", "reference": reference}
    details = error(api.post("/tasks", json=body), 422, "VALIDATION_ERROR")
    assert any(where in key for key in details), details


def test_a_reference_snapshot_is_judged_with_the_benchmarks_vocabulary(
    server: Server, api: httpx.Client
) -> None:
    own = [{"id": "sunrise", "terms": ["Sunrise Health Plan", "SHP"], "source": "member handbook"}]
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("vocabulary reference"), "vocabulary": own}), 201
    )
    turns = '[{"speaker": "agent", "text": "Thank you for calling SHP."}]'
    reference = {"snapshot": {"files": [{"path": "voice/turns.json", "content": turns}]}}
    body = {"benchmark_id": benchmark["id"], "name": "greet", "reference": reference}
    task = ok(api.post("/tasks", json=body), 201)
    voice = {"assert": "voice-transcript", "speaker": "agent", "contains": ["Sunrise Health Plan"]}
    ok(api.post("/criteria", json={"task_id": task["id"], **criterion(voice, label="plan named")}), 201)
    result = ok(api.post(f"/tasks/{task['id']}/self-test"))
    (check,) = result["reference"]["checks"]
    assert check["passed"] is True, check
    assert check["evidence"]["phraseResults"][0]["vocabulary"]["entries"] == ["sunrise"]
