"""`assay lint` and `assay runs compare` against a live server (issue 14): an idle agent's passes are
flagged until the package marks the safety rule `idle_ok`, gates the task with a `required`
criterion and ships a reference solution that passes; two runs compare as no difference."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import yaml
from typer.testing import CliRunner

from assay.client import Assay

from ...service.conftest import Server
from .test_commands import PASSES, cli, run  # noqa: F401  (cli is a fixture)

BOOKED = {
    "assert": "fhir-resource-state",
    "resource_type": "Appointment",
    "search": {"status": "booked"},
    "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
}
APPOINTMENT = {
    "resourceType": "Appointment",
    "status": "booked",
    "participant": [{"actor": {"display": "Dr. Rivera"}, "status": "accepted"}],
}


def _package(folder: Path, name: str, task: dict) -> Path:
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    (folder / "benchmark.yaml").write_text(yaml.safe_dump({"name": name}))
    (folder / "tasks" / "01-book.yaml").write_text(yaml.safe_dump({"name": "Book Dr. Rivera", **task}))
    return folder


def test_lint_flags_an_idle_pass_until_the_package_is_fixed(cli: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    name = f"lint {uuid.uuid4().hex[:8]}"
    folder = _package(
        tmp_path / "pkg",
        name,
        {"criteria": [{"label": "no SSN", "assertion": PASSES}, {"label": "booked", "assertion": BOOKED}]},
    )
    flagged = run(cli, "lint", str(folder), code=1)
    assert (
        "criterion 'no SSN' passes with no agent action" in flagged.stdout
        and "0 of 1 task(s) clean" in flagged.stdout
    )

    fixed = {
        "criteria": [
            {"label": "no SSN", "assertion": PASSES, "idle_ok": True},
            {"label": "booked", "assertion": BOOKED, "required": True},
        ],
        "reference": {"actions": [{"method": "POST", "path": "fhir/Appointment", "json": APPOINTMENT}]},
    }
    _package(folder, name, fixed)
    report = json.loads(run(cli, "lint", str(folder), "--json").stdout)
    (task,) = report["tasks"]
    assert task["ok"] is True and task["reference"]["verdict"] == "pass" and task["idle"]["score"] == 0
    pulled = tmp_path / "pulled"
    run(cli, "pull", name, str(pulled))
    (round_trip,) = list((pulled / "tasks").iterdir())
    back = yaml.safe_load(round_trip.read_text())
    assert back["reference"] == fixed["reference"]
    assert [c.get("idle_ok", False) for c in back["criteria"]] == [True, False]
    assert [c.get("required", False) for c in back["criteria"]] == [False, True]
    published = json.loads(run(cli, "publish", str(folder), "--json").stdout)  # clean: no --force
    assert published["version"] == 1


def test_runs_compare(cli: CliRunner, server: Server, tmp_path: Path) -> None:  # noqa: F811
    name = f"cmp {uuid.uuid4().hex[:8]}"
    folder = _package(tmp_path / "pkg", name, {"criteria": [{"label": "booked", "assertion": BOOKED}]})
    run(cli, "push", str(folder))
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        benchmark_id = next(b.id for b in client.benchmarks.list() if b.name == name)
        ids = []
        for _ in range(2):
            created = client.benchmark_runs.create(benchmark_id=benchmark_id)
            task_run_id = created.task_runs[0].id
            client.task_runs.start(task_run_id, run_token=created.bearer_token)
            client.task_runs.complete(task_run_id, run_token=created.bearer_token)
            ids.append(created.benchmark_run_id)
    shown = run(cli, "runs", "compare", *ids)
    assert "within the noise" in shown.stdout and "Book Dr. Rivera" in shown.stdout
    result = json.loads(run(cli, "runs", "compare", *ids, "--json").stdout)
    assert result["mean_difference"] == 0 and result["exceeds_noise"] is False
