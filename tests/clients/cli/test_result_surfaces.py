"""Every result surface says why: a field is named by the path or FHIRPath the author wrote (never
`?`), and a task zeroed by a required criterion names that gate and the score it would have had —
in `assay runs show`, `assay verify` and the viewer."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
import yaml
from typer.testing import CliRunner

from assay.client import Assay
from assay.clients.cli import app
from assay.snapshot import write_snapshot

from ...service.conftest import Server
from .test_commands import cli, run  # noqa: F401  (cli is a fixture)

EXPRESSION = "participant.actor.where(display.exists()).display"
BOOKED = {
    "assert": "fhir-resource-state",
    "resource_type": "Appointment",
    "search": {"status": "booked"},
    "fields": [{"fhirpath": EXPRESSION, "expected": "Dr. Rivera"}, {"path": "status", "expected": "booked"}],
}
NEVER_SSN = {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["social security number"]}
WRONG_DOCTOR = {
    "resourceType": "Appointment",
    "status": "booked",
    "participant": [{"actor": {"display": "Dr. Lee"}, "status": "accepted"}],
}
CRITERIA = [
    {"label": "no SSN asked", "assertion": NEVER_SSN, "idle_ok": True},
    {"label": "booked with Dr. Rivera", "assertion": BOOKED, "required": True},
]
GATE = 'gated: required criterion #2 "booked with Dr. Rivera" did not pass'
UNGATED = "would have scored 0.75"  # (1 + 1/2) / 2


def test_runs_show_and_viewer_name_the_expression_and_the_gate(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    name = f"why {uuid.uuid4().hex[:8]}"
    folder = tmp_path / "pkg"
    (folder / "tasks").mkdir(parents=True)
    (folder / "benchmark.yaml").write_text(yaml.safe_dump({"name": name}))
    task = {"name": "Book Dr. Rivera", "criteria": CRITERIA}
    (folder / "tasks" / "01-book.yaml").write_text(yaml.safe_dump(task))
    run(cli, "push", str(folder))
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        benchmark_id = next(b.id for b in client.benchmarks.list() if b.name == name)
        created = client.benchmark_runs.create(benchmark_id=benchmark_id)
        task_run_id = created.task_runs[0].id
        started = client.task_runs.start(task_run_id, run_token=created.bearer_token)
        fhir = started.endpoints["fhir"]
        with server.client(created.bearer_token) as agent:
            assert agent.post(f"{fhir}/Appointment", json=WRONG_DOCTOR).status_code == 201
        client.task_runs.complete(task_run_id, run_token=created.bearer_token)

    shown = run(cli, "runs", "show", created.benchmark_run_id).stdout
    flat = " ".join(shown.split())
    assert GATE in flat and UNGATED in flat, shown
    assert f"{EXPRESSION}: expected Dr. Rivera, got Dr. Lee" in flat, shown
    # The tree lists criteria in task order.
    assert flat.index("✔ no SSN asked") < flat.index("✘ booked with Dr. Rivera")
    assert "@None" not in flat and f"{name}@draft" in flat

    with httpx.Client(base_url=server.url, timeout=60) as viewer:
        viewer.post("/ui/login", data={"api_key": server.org_key, "next": "/ui/runs"})
        page = viewer.get(f"/ui/task-runs/{task_run_id}").text
        run_page = viewer.get(f"/ui/runs/{created.benchmark_run_id}").text
    row = re.search(r'<tr class="changed"><td><code>([^<]*)</code>.*?</tr>', page, re.S)
    assert row and row.group(1) == EXPRESSION.replace("'", "&#39;"), row and row.group(0)
    assert "Dr. Lee" in row.group(0)
    assert "would have scored 0.750" in page and "would have scored 0.750" in run_page


def test_verify_names_the_gate_and_marks_required_criteria(tmp_path: Path) -> None:
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps({"criteria": CRITERIA}))
    snapshot = write_snapshot(tmp_path / "snap", fhir=[{**WRONG_DOCTOR, "id": "a1"}])
    result = CliRunner().invoke(app, ["verify", str(task_file), str(snapshot)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert GATE in flat and UNGATED in flat, result.stdout
    assert "(required)" in flat and EXPRESSION in flat
    assert flat.endswith("verdict: fail score: 0")


def test_verify_shows_what_an_hl7_field_read(tmp_path: Path) -> None:
    """HL7 results list under `field_results`; their misses are shown like every other check's."""
    task_file = tmp_path / "task.json"
    assertion = {"assert": "hl7-structural", "fields": [{"path": "PID.5.1", "expected": "SMITH"}]}
    task_file.write_text(json.dumps({"criteria": [{"label": "adt", "assertion": assertion}]}))
    message = "MSH|^~\\&|A|B|C|D|20240101||ADT^A08|1|P|2.5\rPID|1||1||JONES^JOHN\r"
    snapshot = write_snapshot(tmp_path / "snap", hl7=[message])
    result = CliRunner().invoke(app, ["verify", str(task_file), str(snapshot)], env={"COLUMNS": "200"})
    assert "PID.5.1: expected SMITH, got JONES" in " ".join(result.stdout.split()), result.stdout
