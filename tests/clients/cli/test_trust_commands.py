"""`assay lint` and `assay runs compare` against a live server (issue 14): an idle agent's passes are
flagged until the package marks the safety rule `idle_ok`, gates the task with a `required`
criterion and ships a reference solution that passes; two runs compare as no difference."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
import yaml
from typer.testing import CliRunner

from assay.client import Assay
from assay.snapshot import archive_snapshot, write_snapshot

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
    run(cli, "push", str(folder))  # lint self-tests a throwaway draft: the author's own is pushed here
    pulled = tmp_path / "pulled"
    run(cli, "pull", name, str(pulled))
    (round_trip,) = list((pulled / "tasks").iterdir())
    back = yaml.safe_load(round_trip.read_text())
    assert back["reference"] == fixed["reference"]
    assert [c.get("idle_ok", False) for c in back["criteria"]] == [True, False]
    assert [c.get("required", False) for c in back["criteria"]] == [False, True]
    published = json.loads(run(cli, "publish", str(folder), "--json").stdout)  # clean: no --force
    assert published["version"] == 1


def _reference_tarball(folder: Path, doctor: str) -> Path:
    """A hand-made SPEC §6 snapshot of the state a correct agent leaves, packed as `assay` packs one."""
    appointment = {
        **APPOINTMENT,
        "id": "a1",
        "participant": [{"actor": {"display": doctor}, "status": "accepted"}],
    }
    root = write_snapshot(folder / f"state-{doctor}", manifest={"task": "book"}, fhir=[appointment])
    target = folder / "references" / "book.tar.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(archive_snapshot(root))
    return target


def test_lint_judges_a_reference_snapshot_in_the_package(cli: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    """`reference: {snapshot: PATH}` (a tar.gz or a folder in the package) is pushed with the task,
    judged offline by the server's self-test, pulled back as a folder, and push → pull → push is a
    no-op."""
    name = f"lint snapshot {uuid.uuid4().hex[:8]}"
    task = {
        "criteria": [
            {"label": "no SSN", "assertion": PASSES, "idle_ok": True},
            {"label": "booked", "assertion": BOOKED, "required": True},
        ],
        "reference": {"snapshot": "references/book.tar.gz"},
    }
    folder = _package(tmp_path / "pkg", name, task)
    _reference_tarball(tmp_path / "pkg", "Dr. Lee")
    flagged = run(cli, "lint", str(folder), code=1)
    assert "the reference solution fails criterion 'booked'" in flagged.stdout, flagged.stdout
    assert "reference fail 0" in flagged.stdout

    _reference_tarball(tmp_path / "pkg", "Dr. Rivera")
    report = json.loads(run(cli, "lint", str(folder), "--json").stdout)
    (result,) = report["tasks"]
    assert result["ok"] is True and result["idle"]["score"] == 0
    assert result["reference"]["source"] == "snapshot" and result["reference"]["verdict"] == "pass"
    assert result["reference"]["benchmark_run_id"] is None  # judged offline: no run, no playground

    run(cli, "push", str(folder))
    pulled = tmp_path / "pulled"
    run(cli, "pull", name, str(pulled))
    (task_file,) = list((pulled / "tasks").iterdir())
    back = yaml.safe_load(task_file.read_text())
    assert back["reference"] == {"snapshot": f"references/{task_file.stem}"}
    written = json.loads((pulled / back["reference"]["snapshot"] / "fhir/Appointment/a1.json").read_text())
    assert written["participant"][0]["actor"]["display"] == "Dr. Rivera"
    again = json.loads(run(cli, "push", str(pulled), "--json").stdout)
    assert not again["changed"], again
    by_name = run(cli, "lint", name)  # BENCHMARK_DIR or SLUG|name|id: the server's draft as it stands
    assert "reference pass 1" in by_name.stdout and "1 of 1 task(s) clean" in by_name.stdout, by_name.stdout
    published = json.loads(run(cli, "publish", str(pulled), "--json").stdout)  # clean: no --force
    assert published["version"] == 1

    task["reference"] = {"snapshot": "../elsewhere"}
    _package(folder, name, task)
    outside = run(cli, "lint", str(folder), code=2)
    assert "is outside the package" in outside.stderr


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


def test_lint_checks_locally_and_self_tests_a_throwaway_draft(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    """The author's draft is never touched, the throwaway draft is emptied after, its self-test runs
    are hidden from the viewer's run list unless asked for; `--offline` sends nothing at all."""
    name = f"lint draft {uuid.uuid4().hex[:8]}"
    folder = _package(tmp_path / "pkg", name, {"criteria": [{"label": "booked", "assertion": BOOKED}]})
    checked = json.loads(run(cli, "lint", str(folder), "--offline", "--json").stdout)
    assert checked == {"name": name, "tasks": 1, "criteria": 1, "valid": True}

    bad = {**BOOKED, "fields": [{"path": "status", "operator": "sameAs"}]}
    _package(folder, name, {"criteria": [{"label": "booked", "assertion": bad}]})
    refused = run(cli, "lint", str(folder), "--offline", code=2)
    assert "tasks/01-book.yaml: task 'Book Dr. Rivera': criteria[0].assertion.fields.0.operator" in " ".join(
        refused.stderr.split()
    )

    _package(folder, name, {"criteria": [{"label": "booked", "assertion": BOOKED}]})
    report = json.loads(run(cli, "lint", str(folder), "--json").stdout)
    (task,) = report["tasks"]
    assert task["ok"] is True and task["file"] == "tasks/01-book.yaml"
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        names = {b.name: b.id for b in client.benchmarks.list()}
        assert name not in names  # the author's draft was not made by lint
        shadow = names[f"assay lint · {name}"]
        assert list(client.tasks.list(benchmark_id=shadow)) == []  # emptied after the self-test
        assert not [d for d in client.datasets.list() if d.name.startswith(f"assay lint · {name}")]
        assert client.benchmarks.get(shadow).environment_id is None

    with httpx.Client(base_url=server.url, timeout=60) as viewer:
        viewer.post("/ui/login", data={"api_key": server.org_key, "next": "/ui/runs"})
        listed = viewer.get("/ui/runs").text
        shown = viewer.get("/ui/runs", params={"self_tests": "show"}).text
    assert re.search(r"\d+ self-test runs? hidden", listed) and "assay self-test" not in listed
    assert "assay self-test" in shown
    agents = [
        r["agent"] for r in json.loads(run(cli, "runs", "list", "--limit", "500", "--json").stdout)["data"]
    ]
    assert {"name": "assay self-test", "mode": "idle"} not in agents
    every = json.loads(run(cli, "runs", "list", "--limit", "500", "--self-tests", "--json").stdout)["data"]
    assert {"name": "assay self-test", "mode": "idle"} in [r["agent"] for r in every]
