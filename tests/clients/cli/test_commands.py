"""The API-facing commands against a live server: auth, push/pull/publish of a benchmark
package, runs list/show, criteria, and `verify` on a task-run JSON and the state it captured."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from assay.client import Assay
from assay.clients.cli import app
from tests.service.conftest import Server

FAILS = {"assert": "voice-transcript", "speaker": "agent", "contains": ["member ID", "date of birth"]}
PASSES = {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["social security number"]}


@pytest.fixture
def cli(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("ASSAY_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("ASSAY_API_KEY", server.org_key)
    monkeypatch.setenv("ASSAY_BASE_URL", server.url)
    monkeypatch.setenv("COLUMNS", "120")
    return CliRunner()


def run(cli: CliRunner, *args: str, code: int = 0) -> Any:
    result = cli.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def make_package(folder: Path, name: str) -> Path:
    (folder / "tasks").mkdir(parents=True)
    (folder / "datasets" / "inbox").mkdir(parents=True)
    (folder / "benchmark.yaml").write_text(
        yaml.safe_dump({"name": name, "timeout": 600, "environment": {"datasets": ["clinic"]}})
    )
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": {"resourceType": "Patient", "id": "p1"}}],
    }
    (folder / "datasets" / "clinic.fhir.json").write_text(json.dumps(bundle))
    (folder / "datasets" / "inbox" / "referral.txt").write_text("Refer John Smith to cardiology.\n")
    (folder / "datasets" / "calls.yaml").write_text(yaml.safe_dump({"type": "voice", "data": {"turns": []}}))
    (folder / "tasks" / "01-call.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "Call the member",
                "task_item": {"instruction": "Call John"},
                "datasets": ["calls"],
                "criteria": [
                    {"label": "no SSN", "assertion": PASSES},
                    {"label": "disclosures", "assertion": FAILS, "weight": 0.5, "axis": "compliance"},
                ],
            }
        )
    )
    (folder / "tasks" / "02-file.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "File the referral",
                "datasets": ["inbox"],
                "criteria": [{"label": "quiet", "assertion": PASSES}],
            }
        )
    )
    return folder


def test_push_is_idempotent_and_pull_round_trips(cli: CliRunner, server: Server, tmp_path: Path) -> None:
    name = f"pkg {uuid.uuid4().hex[:8]}"
    folder = make_package(tmp_path / "pkg", name)
    first = json.loads(run(cli, "push", str(folder), "--json").stdout)
    assert first["changed"] and "benchmark " + name in first["created"] and len(first["created"]) == 10
    second = run(cli, "push", str(folder))
    assert "Nothing to change" in second.stderr

    pulled = tmp_path / "pulled"
    run(cli, "pull", name, str(pulled))
    assert sorted(p.name for p in (pulled / "tasks").iterdir()) == [
        "1-call-the-member.yaml",
        "2-file-the-referral.yaml",
    ]
    assert (pulled / "datasets" / "inbox" / "referral.txt").read_text() == "Refer John Smith to cardiology.\n"
    again = json.loads(run(cli, "push", str(pulled), "--json").stdout)
    assert not again["changed"], again

    task_file = folder / "tasks" / "01-call.yaml"
    edited = yaml.safe_load(task_file.read_text())
    edited["criteria"][1]["weight"] = 2
    task_file.write_text(yaml.safe_dump(edited))
    (folder / "tasks" / "02-file.yaml").unlink()
    changed = json.loads(run(cli, "push", str(folder), "--json").stdout)
    assert changed["updated"] == ["criterion Call the member #2"]
    assert changed["deleted"] == ["task File the referral"]

    published = json.loads(run(cli, "publish", str(folder), "--force", "--json").stdout)
    assert published["version"] == 1


def test_bad_package_is_exit_2_naming_the_file(cli: CliRunner, tmp_path: Path) -> None:
    folder = make_package(tmp_path / "bad", "bad")
    (folder / "tasks" / "03-typo.yaml").write_text(yaml.safe_dump({"name": "x", "critera": []}))
    result = run(cli, "push", str(folder), code=2)
    assert "03-typo.yaml" in result.stderr and "critera" in result.stderr


def test_runs_show_draws_the_drill_down(cli: CliRunner, server: Server, tmp_path: Path) -> None:
    name = f"runs {uuid.uuid4().hex[:8]}"
    folder = make_package(tmp_path / "pkg", name)
    for task_file in (folder / "tasks").iterdir():  # only FHIR data: a surface-independent run
        task = yaml.safe_load(task_file.read_text())
        del task["datasets"]
        task_file.write_text(yaml.safe_dump(task))
    run(cli, "push", str(folder), "--publish", "--force")
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        slug = next(b.slug for b in client.benchmarks.list() if b.name == name)
        created = client.benchmark_runs.create(benchmark=f"{slug}@1")
        for task_run in created.task_runs:
            client.task_runs.start(task_run.id, run_token=created.bearer_token)
            client.task_runs.complete(task_run.id, run_token=created.bearer_token)
    shown = run(cli, "runs", "show", created.benchmark_run_id).stdout
    assert f"{slug}@1" in shown and "Call the member" in shown and "File the referral" in shown
    assert "✘ disclosures" in shown and "✔ no SSN" in shown
    assert 'phrase "member ID": expected said, got not heard' in shown
    as_json = json.loads(run(cli, "runs", "show", created.benchmark_run_id, "--json").stdout)
    assert [len(t["criterion_runs"]) for t in as_json["task_runs"]] == [2, 1]
    listed = json.loads(run(cli, "runs", "list", "--json").stdout)
    assert created.benchmark_run_id in [r["id"] for r in listed["data"]]

    task_run_id = created.task_runs[0].id
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        (tmp_path / "task-run.json").write_text(client.task_runs.get(task_run_id).model_dump_json())
        (tmp_path / "state.tar.gz").write_bytes(client.task_runs.state(task_run_id))
    verified = run(cli, "verify", str(tmp_path / "task-run.json"), str(tmp_path / "state.tar.gz"))
    assert "verdict: partial" in verified.stdout
    assert "member ID" in verified.stdout and "not heard" in verified.stdout
    empty = tmp_path / "not-a-snapshot"
    empty.mkdir()
    refused = run(cli, "verify", str(tmp_path / "task-run.json"), str(empty), code=2)
    assert "holds no snapshot" in refused.stderr


def test_auth_flag_beats_env_beats_config(
    cli: CliRunner, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_API_KEY")
    assert json.loads(run(cli, "auth", "status", "--json", code=1).stdout)["status"] == "missing"
    run(cli, "auth", "set-key", server.org_key, "--base-url", server.url)
    status = json.loads(run(cli, "auth", "status", "--json").stdout)
    assert status["status"] == "valid" and status["key_source"].endswith("config.json")
    monkeypatch.setenv("ASSAY_API_KEY", "vk_not_a_key")
    status = json.loads(run(cli, "auth", "status", "--json", code=1).stdout)
    assert (status["status"], status["key_source"]) == ("rejected", "ASSAY_API_KEY")
    status = json.loads(run(cli, "auth", "status", "--json", "--api-key", server.org_key).stdout)
    assert (status["status"], status["key_source"]) == ("valid", "--api-key")


def test_criteria_commands(cli: CliRunner, server: Server) -> None:
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        task = client.tasks.create(
            benchmark_id=client.benchmarks.create(name=f"c {uuid.uuid4().hex}").id, name="t"
        )
    made = json.loads(
        run(
            cli,
            "criteria",
            "create",
            "--task",
            task.id,
            "--label",
            "quiet",
            "--assertion",
            json.dumps(PASSES),
            "--json",
        ).stdout
    )
    assert made["assertion"] == PASSES and made["required"] is False
    gate = json.loads(
        run(
            cli,
            *("criteria", "create", "--task", task.id, "--label", "gate", "--assertion", json.dumps(PASSES)),
            *("--required", "--idle-ok", "--json"),
        ).stdout
    )
    assert gate["required"] is True and gate["idle_ok"] is True
    listed = json.loads(run(cli, "criteria", "list", "--task", task.id, "--json").stdout)
    assert [c["id"] for c in listed["data"]] == [made["id"], gate["id"]]  # task order
    changed = json.loads(run(cli, "criteria", "update", gate["id"], "--not-required", "--json").stdout)
    assert changed["required"] is False and changed["idle_ok"] is True
    bad = run(
        cli,
        "criteria",
        "create",
        "--task",
        task.id,
        "--label",
        "x",
        "--assertion",
        '{"assert": "nope"}',
        code=1,
    )
    assert "VALIDATION_ERROR" in bad.stderr and "assertion.assert" in bad.stderr
    assert json.loads(run(cli, "criteria", "delete", made["id"], "--json").stdout) == {"deleted": True}
