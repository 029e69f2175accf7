"""`assay lint` and `assay runs compare` against a live server (issue 14): an idle agent's passes are
flagged until the package marks the safety rule `idle_ok`, gates the task with a `required`
criterion and ships a reference solution that passes; two runs compare as no difference."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
import yaml
from typer.testing import CliRunner

from assay.client import Assay
from assay.snapshot import archive_snapshot, write_snapshot
from assay.store.models import Base

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


def _orphans(server: Server) -> list[str]:
    """Rows (and file trees) that name a task run, playground or sandbox that no longer exists:
    every table of the schema, the surfaces' included, read for its id columns."""
    owners = {
        "benchmark_run_id": "benchmark_runs",
        "task_run_id": "task_runs",
        "playground_id": "playgrounds",
        "sandbox_id": "sandboxes",
    }
    named_by_playground = {("fhir_stores", "id"), ("fhir_versions", "store_id")}
    found: list[str] = []
    with server.database.engine.connect() as connection:
        live = {
            table: {row[0] for row in connection.execute(sa.text(f"SELECT id FROM {table}"))}
            for table in set(owners.values())
        }
        for table in Base.metadata.sorted_tables:
            for column in table.columns:
                owner = owners.get(column.name) or (
                    "playgrounds" if (table.name, column.name) in named_by_playground else None
                )
                if owner is None or owner == table.name:
                    continue
                values = {row[0] for row in connection.execute(sa.select(column).distinct())}
                found += [f"{table.name}.{column.name} = {value}" for value in values - live[owner] - {None}]
    assert server.settings is not None
    files_root = Path(server.settings.data_dir) / "files"
    if files_root.is_dir():
        found += [
            f"files/{tree.name}"
            for tree in files_root.iterdir()
            if tree.name.startswith("pg_") and tree.name not in live["playgrounds"]
        ]
    return found


def _every_surface_package(folder: Path, name: str, task: dict) -> Path:
    """A package whose self-test leaves something on every surface: datasets for FHIR, files, HL7
    and voice, and a reference that writes to FHIR (versions and sandbox events)."""
    _package(folder, name, {**task, "datasets": ["calls", "referral", "inbox"]})
    (folder / "benchmark.yaml").write_text(
        yaml.safe_dump({"name": name, "environment": {"datasets": ["clinic"]}})
    )
    (folder / "datasets" / "inbox").mkdir(parents=True, exist_ok=True)
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": {"resourceType": "Patient", "id": "p1"}}],
    }
    (folder / "datasets" / "clinic.fhir.json").write_text(json.dumps(bundle))
    (folder / "datasets" / "inbox" / "referral.txt").write_text("Refer John Smith to cardiology.\n")
    (folder / "datasets" / "calls.yaml").write_text(
        yaml.safe_dump({"type": "voice", "data": {"turns": [{"speaker": "caller", "text": "Hello"}]}})
    )
    message = "MSH|^~\\&|REG|HOSP|AGENT|CLINIC|20260301120000||ADT^A04|IN-1|P|2.5.1\r"
    (folder / "datasets" / "referral.yaml").write_text(
        yaml.safe_dump({"type": "hl7", "data": {"inbox": [message]}})
    )
    return folder


def test_lint_checks_locally_and_self_tests_a_throwaway_draft_it_deletes(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    """The author's draft is never touched; the throwaway draft — benchmark, tasks, criteria,
    environment, datasets — and its self-test runs with everything they held are gone after;
    `--offline` sends nothing at all."""
    before = set(_orphans(server))  # the session's server: other tests' leftovers are not this one's
    name = f"lint draft {uuid.uuid4().hex[:8]}"
    task = {
        "criteria": [{"label": "booked", "assertion": BOOKED}],
        "reference": {"actions": [{"method": "POST", "path": "fhir/Appointment", "json": APPOINTMENT}]},
    }
    folder = _every_surface_package(tmp_path / "pkg", name, task)
    checked = json.loads(run(cli, "lint", str(folder), "--offline", "--json").stdout)
    assert checked == {"name": name, "tasks": 1, "criteria": 1, "valid": True}

    bad = {**BOOKED, "fields": [{"path": "status", "operator": "sameAs"}]}
    _package(
        folder,
        name,
        {
            **task,
            "datasets": ["calls", "referral", "inbox"],
            "criteria": [{"label": "booked", "assertion": bad}],
        },
    )
    refused = run(cli, "lint", str(folder), "--offline", code=2)
    assert "tasks/01-book.yaml: task 'Book Dr. Rivera': criteria[0].assertion.fields.0.operator" in " ".join(
        refused.stderr.split()
    )

    _every_surface_package(folder, name, task)
    linted = run(cli, "lint", str(folder), "--json")
    assert "not cleaned up" not in linted.stderr
    report = json.loads(linted.stdout)
    (result,) = report["tasks"]
    assert result["ok"] is True and result["file"] == "tasks/01-book.yaml"
    assert result["reference"]["verdict"] == "pass" and result["reference"]["actions"]
    shadow = report["benchmark_id"]
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        names = {b.name for b in client.benchmarks.list()}
        assert name not in names and f"assay lint · {name}" not in names
        assert not [e for e in client.environments.list() if e.name.startswith("assay lint · ")]
        assert not [d for d in client.datasets.list() if d.name.startswith(f"assay lint · {name}")]
    with server.client() as api:
        assert api.get(f"/benchmarks/{shadow}").status_code == 404
        assert api.get("/tasks", params={"benchmark_id": shadow}).json()["data"] == []
        assert api.get("/criteria", params={"task_id": result["task_id"]}).json()["data"] == []
        listed = api.get("/benchmark-runs", params={"benchmark_id": shadow, "self_tests": "true"})
        assert listed.json()["data"] == []
        for trial in (result["idle"], result["reference"]):
            assert api.get(f"/benchmark-runs/{trial['benchmark_run_id']}").status_code == 404
            assert api.get(f"/task-runs/{trial['task_run_id']}").status_code == 404
    assert set(_orphans(server)) - before == set()


def test_self_test_runs_are_hidden_unless_asked_for_and_keep_their_benchmark_only_while_real_runs_exist(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    """`assay lint SLUG` self-tests the author's draft as it stands: its runs stay, hidden from the
    API's, the CLI's and the viewer's run lists unless asked for. A benchmark whose runs are all
    self-tests can be deleted (with them); one with an agent's run cannot."""
    name = f"lint kept {uuid.uuid4().hex[:8]}"
    folder = _package(tmp_path / "pkg", name, {"criteria": [{"label": "booked", "assertion": BOOKED}]})
    run(cli, "push", str(folder))
    run(cli, "lint", name)
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        benchmark = {b.name: b for b in client.benchmarks.list()}[name]
        (task,) = client.tasks.list(benchmark_id=benchmark.id)
    with server.client() as api:
        hidden = api.get("/benchmark-runs", params={"benchmark_id": benchmark.id}).json()["data"]
        shown = api.get("/benchmark-runs", params={"benchmark_id": benchmark.id, "self_tests": "true"}).json()
        assert hidden == [] and {r["agent"]["name"] for r in shown["data"]} == {"assay self-test"}
        assert api.get("/benchmark-runs", params={"self_tests": "maybe"}).status_code == 400

    with httpx.Client(base_url=server.url, timeout=60) as viewer:
        viewer.post("/ui/login", data={"api_key": server.org_key, "next": "/ui/runs"})
        listed = viewer.get("/ui/runs").text
        shown_page = viewer.get("/ui/runs", params={"self_tests": "show"}).text
    assert re.search(r"\d+ self-test runs? hidden", listed) and "assay self-test" not in listed
    assert "assay self-test" in shown_page
    agents = [
        r["agent"] for r in json.loads(run(cli, "runs", "list", "--limit", "500", "--json").stdout)["data"]
    ]
    assert {"name": "assay self-test", "mode": "idle"} not in agents
    every = json.loads(run(cli, "runs", "list", "--limit", "500", "--self-tests", "--json").stdout)["data"]
    assert {"name": "assay self-test", "mode": "idle"} in [r["agent"] for r in every]

    with server.client() as api:
        agent_run = api.post("/benchmark-runs", json={"benchmark_id": benchmark.id, "agent": {"name": "bot"}})
        assert agent_run.status_code == 201
        assert api.delete(f"/tasks/{task.id}").status_code == 204
        kept = api.delete(f"/benchmarks/{benchmark.id}")
        assert kept.status_code == 409 and "kept for their records" in kept.text
        assert api.get(f"/benchmark-runs/{agent_run.json()['id']}").status_code == 200
        every_run = api.get("/benchmark-runs", params={"benchmark_id": benchmark.id, "self_tests": "true"})
        assert [r["agent"]["name"] for r in every_run.json()["data"]] == ["bot", "assay self-test"]


def test_a_self_test_run_still_in_progress_is_torn_down_and_deleted_with_its_benchmark(
    server: Server,
) -> None:
    """A self-test run whose playground is still started (a self-test cut short) goes with its
    benchmark: the playground is torn down first, so its token reaches nothing afterwards."""
    before = set(_orphans(server))  # the session's server: other tests' leftovers are not this one's
    with server.client() as api:
        benchmark = api.post("/benchmarks", json={"name": f"cut short {uuid.uuid4().hex[:8]}"}).json()
        task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "Book"}).json()
        body = {"benchmark_id": benchmark["id"], "agent": {"name": "assay self-test", "mode": "idle"}}
        created = api.post("/v1/benchmark-runs", json=body).json()
        (task_run,) = created["task_runs"]
        with server.client(created["bearer_token"]) as agent:
            assert agent.post(task_run["start_url"]).status_code == 200
            wrote = agent.post(f"/v1/task-runs/{task_run['id']}/fhir/Appointment", json=APPOINTMENT)
            assert wrote.status_code == 201
            assert api.delete(f"/benchmarks/{benchmark['id']}").status_code == 409  # its task first
            assert api.delete(f"/tasks/{task['id']}").status_code == 204
            assert api.delete(f"/benchmarks/{benchmark['id']}").status_code == 204
            after = agent.post(f"/v1/task-runs/{task_run['id']}/fhir/Appointment", json=APPOINTMENT)
            assert after.status_code in (401, 404), after.text
        assert api.get(f"/benchmark-runs/{created['benchmark_run_id']}").status_code == 404
        assert api.get(f"/task-runs/{task_run['id']}").status_code == 404
    assert set(_orphans(server)) - before == set()
