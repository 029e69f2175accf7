"""A newcomer's first hour, scripted: demo → author a two-surface package (FHIR + HL7) from the
docs alone → push and publish → run it as an agent harness → drill down. Every command it runs
appears in `docs/` or the README, and every criterion is copied from `docs/assertions.md`, so a
step that needs the source to be read fails here first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from assay.client import Assay
from assay.clients.cli import app
from tests.conftest import FIXTURES

from .conftest import Server
from .test_assertions_reference import examples

ROOT = Path(__file__).parents[2]
DOCS = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


def documented(*command: str) -> list[str]:
    """`command` as run, after checking the docs show the command (`assay runs show`) and each
    option it is given (`--publish`)."""
    words = [part for part in command if not part.startswith(("/", "br_"))]
    verbs = [word for word in words if not word.startswith("--")]
    assert f"assay {' '.join(verbs)}" in DOCS, f"`assay {' '.join(verbs)}` is in no doc"
    for option in (word for word in words if word.startswith("--")):
        assert f"assay {verbs[0]}" in DOCS and option in DOCS, f"`{option}` is in no doc"
    return list(command)


@pytest.fixture
def cli(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    # docs/benchmark-packages.md: the key and server come from ASSAY_API_KEY / ASSAY_BASE_URL
    monkeypatch.setenv("ASSAY_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("ASSAY_API_KEY", server.org_key)
    monkeypatch.setenv("ASSAY_BASE_URL", server.url)
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


def invoke(cli: CliRunner, *command: str) -> str:
    result = cli.invoke(app, documented(*command))
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


def test_demo_then_a_two_surface_package_from_the_docs(
    cli: CliRunner, server: Server, tmp_path: Path
) -> None:
    demo = invoke(cli, "demo", "--data-dir", str(tmp_path / "demo"))
    assert "Where to look next" in demo

    # Author: the layout of docs/benchmark-packages.md, criteria copied from docs/assertions.md.
    fhir_example = next(a for state, _, a in examples() if state == "fhir")
    hl7_example = next(a for state, verdict, a in examples() if state == "hl7" and verdict == "pass")
    name = f"newcomer {uuid.uuid4().hex[:8]}"
    package = tmp_path / "newcomer"
    (package / "tasks").mkdir(parents=True)
    assert "benchmark.yaml" in DOCS and "tasks/*.yaml" in DOCS
    (package / "benchmark.yaml").write_text(yaml.safe_dump({"name": name}))
    task = {
        "name": "Register the patient and tell the lab",
        "task_item": {"instruction": "Create Peter Chalmers' record, then send the lab an ADT^A01."},
        "criteria": [
            {"label": "patient on record", "assertion": fhir_example, "required": True},
            {"label": "ADT^A01 sent", "assertion": hl7_example},
        ],
    }
    (package / "tasks" / "01-register.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    assert "--offline" in DOCS
    invoke(cli, "lint", str(package), "--offline")

    pushed = json.loads(invoke(cli, "push", str(package), "--publish", "--json"))
    version = pushed["published"]

    # Run: docs/sdk.md's harness loop; the agent's requests as docs/sandboxes.md describes them.
    patient = json.loads((FIXTURES / "fhir/r4-examples/Patient-example.json").read_text())
    adt = (FIXTURES / "hl7v2/cdc-trusted-intermediary/Other__001_ADT_A01.hl7").read_text()
    with Assay(api_key=server.org_key, base_url=server.url) as assay:
        run = assay.benchmark_runs.create(benchmark=f"{version['slug']}@{version['version']}")
        (task_run,) = run.task_runs or []
        started = assay.task_runs.start(task_run.id, run_token=run.bearer_token)
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {run.bearer_token}"}, timeout=60
        ) as agent:
            fhir = started.endpoints["fhir"]
            assert agent.put(f"{fhir}/Patient/example", json=patient).status_code in (200, 201)
            answer = agent.post(started.endpoints["hl7_outbound"], json={"payload": adt})
            assert answer.status_code == 200 and "MSA|AA" in answer.text
        result = assay.task_runs.complete(task_run.id, run_token=run.bearer_token)
        assert result.verdict == "pass", result

    # Drill down.
    shown = " ".join(invoke(cli, "runs", "show", run.benchmark_run_id).split())
    assert (
        f"pass 1 {version['slug']}@1" in shown
        and "✔ patient on record" in shown
        and "✔ ADT^A01 sent" in shown
    )
