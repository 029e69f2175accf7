"""`no-unexpected-changes` end to end (issue 14): seeded datasets and scenario steps on FHIR, files,
HL7, the portal and X12, the agent's writes through the real surfaces (FHIR REST, SFTP with paramiko,
HL7 over HTTP, portal REST, X12 over HTTP), `complete`, `rescore`, and `GET /task-runs/{id}/state` scored offline
by `assay verify` — the wrong patient and the stray file are caught live and from the tarball."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.store.models import Sandbox
from tests.sandboxes.files.conftest import sftp_client
from tests.sandboxes.portal.world import PAYER, SUBMISSION
from tests.sandboxes.x12.requests import eligibility_270, interchange, review_278, subscriber_270

from ..sandboxes.payer.samples import PAYER as X12_PAYER
from .builders import ALICE_AND_BOB, book_alice, criterion, make_dataset, ok, start_run, unique
from .conftest import Server

ALLOW_ALICE_APPOINTMENT = {
    "assert": "no-unexpected-changes",
    "allow": [{"resourceType": "Appointment", "change": "created", "search": {"patient": "Patient/alice"}}],
}


def _benchmark(api: httpx.Client) -> str:
    dataset = make_dataset(api, "fhir", ALICE_AND_BOB)
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [dataset["id"]]}), 201
    )
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("book"), "environment_id": environment["id"]}), 201
    )
    task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "book alice"}), 201)
    ok(api.post("/criteria", json={"task_id": task["id"], **criterion(ALLOW_ALICE_APPOINTMENT)}), 201)
    return str(benchmark["id"])


def _run(
    server: Server, api: httpx.Client, benchmark_id: str, tmp_path: Path, *, edit_bob: bool
) -> dict[str, Any]:
    def act(agent: httpx.Client, started: dict[str, Any]) -> None:
        book_alice(agent, started["endpoints"]["fhir"], edit_bob=edit_bob)

    return _judged(server, api, benchmark_id, tmp_path, act)


def _judged(
    server: Server,
    api: httpx.Client,
    benchmark_id: str,
    tmp_path: Path,
    act: Callable[[httpx.Client, dict[str, Any]], None],
) -> dict[str, Any]:
    """Start, let `act` play the agent, complete; then rescore and `assay verify` on the tarball,
    which must agree with `complete` on the score, the verdict and the unexpected changes."""
    run = start_run(api, benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        started = ok(agent.post(task_run["start_url"]))
        act(agent, started)
        completed = ok(agent.post(task_run["complete_url"]))
    [live] = completed["checks"]
    rescored = ok(api.post(f"/task-runs/{task_run['id']}/rescore", json={}))
    detail = ok(api.get(f"/task-runs/{task_run['id']}"))
    record = ok(api.get(f"/criterion-runs/{detail['criterion_runs'][0]['id']}"))

    state = api.get(f"/task-runs/{task_run['id']}/state")
    assert state.status_code == 200
    folder = tmp_path / task_run["id"]
    folder.mkdir()
    (folder / "state.tar.gz").write_bytes(state.content)
    (folder / "task.json").write_text(json.dumps(detail["snapshot"]))
    result = CliRunner().invoke(
        cli, ["verify", str(folder / "task.json"), str(folder / "state.tar.gz"), "--json"]
    )
    offline = json.loads(result.stdout)
    [offline_run] = offline["criterion_runs"]
    assert offline["score"] == completed["score"] == rescored["score"]
    assert offline_run["passed"] == live["passed"]
    assert offline_run["evidence"]["unexpected"] == record["evidence"]["unexpected"]
    assert offline_run["evidence"]["changes"] == record["evidence"]["changes"]
    return {"live": live, "record": record, "offline": offline_run, "exit": result.exit_code}


def test_wrong_patient_fails_and_allowed_create_passes(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    benchmark_id = _benchmark(api)

    wrong = _run(server, api, benchmark_id, tmp_path, edit_bob=True)
    assert wrong["live"]["passed"] is False and wrong["record"]["status"] == "ok"
    assert wrong["record"]["evidence"]["unexpected"] == [
        {"surface": "fhir", "key": "Patient/bob", "change": "updated", "allowed": None}
    ]
    created = [c for c in wrong["record"]["evidence"]["changes"] if c["change"] == "created"]
    assert len(created) == 1 and created[0]["key"].startswith("Appointment/") and created[0]["allowed"] == 0

    right = _run(server, api, benchmark_id, tmp_path, edit_bob=False)
    assert right["live"]["passed"] is True and right["offline"]["passed"] is True, right
    assert right["exit"] == 0
    assert [c["change"] for c in right["record"]["evidence"]["changes"]] == ["created"]


def _task(api: httpx.Client, datasets: list[dict[str, Any]], assertion: dict[str, Any], **task: Any) -> str:
    environment = ok(
        api.post("/environments", json={"name": unique("env"), "dataset_ids": [d["id"] for d in datasets]}),
        201,
    )
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("changes"), "environment_id": environment["id"]}), 201
    )
    made = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "changes", **task}), 201)
    ok(api.post("/criteria", json={"task_id": made["id"], **criterion(assertion)}), 201)
    return str(benchmark["id"])


def test_a_stray_sftp_file_is_caught_live_and_from_the_tarball(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    seeded = make_dataset(api, "files", {"files": [{"path": "inbox/order.txt", "content": "order 42\n"}]})
    drop = {"step": "drop_file_inbox", "path": "inbox/request.json", "content": "{}"}
    only_outbox = {
        "assert": "no-unexpected-changes",
        "surfaces": ["files"],
        "allow": [{"path": "outbox/*.pdf"}],
    }
    benchmark_id = _task(api, [seeded], only_outbox, scenario=[drop])

    def upload(*stray: str) -> Callable[[httpx.Client, dict[str, Any]], None]:
        def act(agent: httpx.Client, started: dict[str, Any]) -> None:
            client = sftp_client(started["credentials"]["sftp"])
            try:
                client.mkdir("outbox")
                client.putfo(io.BytesIO(b"%PDF-1.4 summary"), "outbox/summary.pdf")
                for path in stray:
                    client.putfo(io.BytesIO(b"scratch"), path)
            finally:
                client.close()

        return act

    stray = _judged(server, api, benchmark_id, tmp_path, upload("outbox/notes.txt", "inbox/order.txt"))
    assert stray["live"]["passed"] is False and stray["offline"]["passed"] is False
    assert [(c["key"], c["change"]) for c in stray["record"]["evidence"]["unexpected"]] == [
        ("inbox/order.txt", "updated"),
        ("outbox/notes.txt", "created"),
    ]
    clean = _judged(server, api, benchmark_id, tmp_path, upload())
    # the dataset's file and the scenario's drop are the baseline, not the agent's changes
    assert clean["live"]["passed"] is True and clean["offline"]["passed"] is True and clean["exit"] == 0
    assert [c["key"] for c in clean["record"]["evidence"]["changes"]] == ["outbox/summary.pdf"]


def _adt(facility: str, control: str, mrn: str) -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|{control}|P|2.5.1\r"
        "EVN|A08|20260301120500\r"
        f"PID|1||{mrn}^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
    )


def test_an_hl7_message_about_the_wrong_patient_is_caught(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    inbox = make_dataset(
        api, "hl7", {"inbox": ["MSH|^~\\&|REG|HOSP|AGENT|CLINIC|20260301120000||ADT^A04|IN-1|P|2.5.1\r"]}
    )
    allow = {
        "assert": "no-unexpected-changes",
        "surfaces": ["hl7"],
        "allow": [{"message_type": "ADT^A08", "where": {"PID.3.1": "MRN123"}, "max": 1}],
    }
    benchmark_id = _task(api, [inbox], allow)

    def send(*mrns: str) -> Callable[[httpx.Client, dict[str, Any]], None]:
        def act(agent: httpx.Client, started: dict[str, Any]) -> None:
            facility = started["credentials"]["hl7"]["receiving_facility"]
            for i, mrn in enumerate(mrns):
                sent = agent.post(
                    started["endpoints"]["hl7_outbound"],
                    content=_adt(facility, f"OUT-{i}", mrn),
                    headers={"Content-Type": "x-application/hl7-v2+er7"},
                )
                assert "MSA|AA" in sent.text, sent.text

        return act

    wrong = _judged(server, api, benchmark_id, tmp_path, send("MRN123", "MRN999", "MRN123"))
    assert wrong["live"]["passed"] is False
    assert [(c["key"], c["control_id"]) for c in wrong["record"]["evidence"]["unexpected"]] == [
        ("outbound/2", "OUT-1"),  # the wrong patient
        ("outbound/3", "OUT-2"),  # the duplicate, beyond max
    ]
    right = _judged(server, api, benchmark_id, tmp_path, send("MRN123"))
    assert right["live"]["passed"] is True and right["exit"] == 0


def test_a_portal_edit_of_the_wrong_patient_is_caught(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    portal = make_dataset(
        api,
        "portal",
        {
            "payer": PAYER,
            "resources": {
                "patients": {"rows": [{"member_id": "M1001", "name": "Ann Lee", "birth_date": "1980-04-02"}]},
                "providers": {"rows": [{"npi": "1234567893", "name": "Dr. Rivera"}]},
            },
        },
    )
    second = {
        "step": "set_portal_row",
        "resource": "patients",
        "row": {"member_id": "M1002", "name": "Bo Diaz"},
    }
    allow = {
        "assert": "no-unexpected-changes",
        "surfaces": ["portal"],
        "allow": [
            {"resource": "prior_auth_requests", "change": "created", "where": {"patient.member_id": "M1001"}},
            {"resource": "patients", "change": "updated", "where": {"member_id": "M1001"}},
        ],
    }
    benchmark_id = _task(api, [portal], allow, scenario=[second])

    def edit(member: str) -> Callable[[httpx.Client, dict[str, Any]], None]:
        def act(agent: httpx.Client, started: dict[str, Any]) -> None:
            base = f"/v1/task-runs/{started['task_run_id']}/portal"
            ok(agent.post(f"{base}/prior_auth_requests", json=SUBMISSION), 201)
            ok(agent.patch(f"{base}/patients/{member}", json={"phone": "555-0100"}))

        return act

    wrong = _judged(server, api, benchmark_id, tmp_path, edit("M1002"))
    assert wrong["live"]["passed"] is False and wrong["offline"]["passed"] is False
    assert wrong["record"]["evidence"]["unexpected"] == [
        {"surface": "portal", "key": "patients/1", "change": "updated", "allowed": None,
         "resource": "patients", "portal": None},
    ]  # fmt: skip
    right = _judged(server, api, benchmark_id, tmp_path, edit("M1001"))
    assert right["live"]["passed"] is True and right["offline"]["passed"] is True
    assert [c["allowed"] for c in right["record"]["evidence"]["changes"]] == [1, 0]


def test_an_x12_review_for_the_wrong_member_is_caught(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    """X12's writes are the review requests (278) the agent posts; its eligibility inquiries (270)
    change nothing. A 278 for another member, or a second 278, is caught live, on rescore and from
    the tarball (`_judged` checks all three agree)."""
    payer = make_dataset(api, "x12", X12_PAYER)
    allow = {
        "assert": "no-unexpected-changes",
        "surfaces": ["x12"],
        "allow": [{"transaction_set": "278", "member_id": "W123456789", "max": 1}],
    }
    benchmark_id = _task(api, [payer], allow)
    inquiry = interchange(
        "270", eligibility_270(subscriber_270("W123456789", trace="T1", last="DOE", first="JANE"))
    )

    def review(*members: str) -> Callable[[httpx.Client, dict[str, Any]], None]:
        def act(agent: httpx.Client, started: dict[str, Any]) -> None:
            base = started["endpoints"]["x12"]
            reviews = (
                interchange("278", review_278(m, "70553"), control=906 + n) for n, m in enumerate(members)
            )
            for body in (inquiry, *reviews):
                code = body.split("~ST*", 1)[1][:3]
                answered = agent.post(
                    f"{base}/{code}", content=body, headers={"content-type": "application/edi-x12"}
                )
                assert answered.status_code == 200, answered.text

        return act

    wrong = _judged(server, api, benchmark_id, tmp_path, review("W123456789", "X987"))
    assert wrong["live"]["passed"] is False and wrong["offline"]["passed"] is False
    [unexpected] = wrong["record"]["evidence"]["unexpected"]
    assert (unexpected["key"], unexpected["transaction_set"], unexpected["member_ids"]) == (
        "exchanges/3",
        "278",
        ["X987"],
    )
    twice = _judged(server, api, benchmark_id, tmp_path, review("W123456789", "W123456789"))
    assert twice["live"]["passed"] is False
    assert [c["allowed"] for c in twice["record"]["evidence"]["changes"]] == [0, None]
    right = _judged(server, api, benchmark_id, tmp_path, review("W123456789"))
    assert right["live"]["passed"] is True and right["offline"]["passed"] is True and right["exit"] == 0
    assert [c["key"] for c in right["record"]["evidence"]["changes"]] == ["exchanges/2"]


def test_a_playground_from_before_baselines_is_an_error_live_and_offline(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    """A playground seeded before files and portal baselines were recorded (simulated: its
    `files.baseline.json` and the portal sandbox's `seeded_seq` removed after `start`): the check
    says `error` naming the surfaces — on complete, on rescore and from the tarball — never a pass
    or a fail over what it could not judge."""
    files = make_dataset(api, "files", {"files": [{"path": "inbox/order.txt", "content": "order 42\n"}]})
    portal = make_dataset(
        api,
        "portal",
        {"payer": PAYER, "resources": {"patients": {"rows": [{"member_id": "M1001", "name": "Ann Lee"}]}}},
    )
    asked = {"assert": "no-unexpected-changes", "surfaces": ["files", "portal"]}
    benchmark_id = _task(api, [files, portal], asked)
    [task] = ok(api.get("/tasks", params={"benchmark_id": benchmark_id}))["data"]
    ok(
        api.post("/criteria", json={"task_id": task["id"], **criterion({"assert": "no-unexpected-changes"})}),
        201,
    )

    run = start_run(api, benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as agent:
        ok(agent.post(task_run["start_url"]))
        playground_id = ok(api.get(f"/task-runs/{task_run['id']}"))["playground_id"]
        assert server.settings is not None
        [recorded] = [
            p for p in server.settings.data_dir.rglob("files.baseline.json") if playground_id in str(p)
        ]
        recorded.unlink()
        with server.database.transaction() as session:
            [sandbox] = session.query(Sandbox).filter_by(playground_id=playground_id, type="portal").all()
            sandbox.credentials = {k: v for k, v in (sandbox.credentials or {}).items() if k != "seeded_seq"}
        completed = ok(agent.post(task_run["complete_url"]))

    def unjudged(checks: list[dict[str, Any]]) -> None:
        named, every = checks
        assert named["status"] == every["status"] == "error", checks
        assert named["passed"] is every["passed"] is False
        assert "no seeded baseline recorded for files, portal" in named["details"]
        assert "no seeded baseline recorded for files, portal" in every["details"]

    def recorded_runs() -> list[dict[str, Any]]:
        listed = ok(api.get(f"/task-runs/{task_run['id']}"))["criterion_runs"]
        return [ok(api.get(f"/criterion-runs/{run['id']}")) for run in listed]

    detail = ok(api.get(f"/task-runs/{task_run['id']}"))
    unjudged(recorded_runs())
    assert completed["verdict"] == detail["verdict"]
    rescored = ok(api.post(f"/task-runs/{task_run['id']}/rescore", json={}))
    unjudged(recorded_runs())
    assert rescored["score"] == completed["score"] == 0

    state = api.get(f"/task-runs/{task_run['id']}/state")
    (tmp_path / "state.tar.gz").write_bytes(state.content)
    (tmp_path / "task.json").write_text(json.dumps(detail["snapshot"]))
    result = CliRunner().invoke(
        cli, ["verify", str(tmp_path / "task.json"), str(tmp_path / "state.tar.gz"), "--json"]
    )
    unjudged(json.loads(result.stdout)["criterion_runs"])
