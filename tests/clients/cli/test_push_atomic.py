"""`assay push` is all or nothing: every problem a package has that can be known locally is listed
(file, task, criterion, key) before anything is sent; a step the server refuses rolls back what
the push had made or changed; the push after the fix converges. Syntax errors carry line and column."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from typer.testing import CliRunner

from assay.client import Assay

from ...service.conftest import Server
from .test_commands import PASSES, cli, make_package, run  # noqa: F401  (cli is a fixture)


def _tasks(folder: Path) -> dict[str, dict]:
    return {path.name: yaml.safe_load(path.read_text()) for path in (folder / "tasks").glob("*.yaml")}


def _write(folder: Path, file: str, task: dict) -> None:
    (folder / "tasks" / file).write_text(yaml.safe_dump(task))


def _state(server: Server, name: str) -> dict | None:
    """What the server holds of benchmark `name`: tasks by name with their criteria labels."""
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        found = [b for b in client.benchmarks.list() if b.name == name]
        datasets = sorted(d.name for d in client.datasets.list() if d.name.startswith(f"{name}: "))
        if not found:
            return {"datasets": datasets} if datasets else None
        tasks = {}
        for listed in client.tasks.list(benchmark_id=found[0].id):
            task = client.tasks.get(listed.id)
            tasks[task.name] = [c.label for c in task.criteria or []]
        return {"tasks": tasks, "datasets": datasets}


def test_every_local_problem_is_listed_and_nothing_is_sent(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    name = f"atomic {uuid.uuid4().hex[:8]}"
    folder = make_package(tmp_path / "pkg", name)
    tasks = _tasks(folder)
    typo = {**PASSES, "speaker": "agent", "not_contains": ["x"]}
    inner = {
        "assert": "fhir-resource-state",
        "resource_type": "Patient",
        "fields": [{"path": "id", "operator": "sameAs"}],
    }
    tasks["02-file.yaml"]["criteria"].append({"label": "typo", "assertion": inner})
    tasks["01-call.yaml"]["criteria"][1]["weight"] = "heavy"
    tasks["01-call.yaml"]["criteria"][0]["assertion"] = {**typo, "speaker": "robot"}
    for file, task in tasks.items():
        _write(folder, file, task)
    refused = run(cli, "push", str(folder), code=2)
    err = " ".join(refused.stderr.split())
    assert "3 problems; nothing was sent" in err, refused.stderr
    assert "tasks/02-file.yaml: task 'File the referral': criteria[1].assertion.fields.0.operator:" in err
    assert "tasks/01-call.yaml: task 'Call the member': criteria[1].weight:" in err
    assert "tasks/01-call.yaml: task 'Call the member': criteria[0].assertion.speaker:" in err
    assert _state(server, name) is None


def test_a_refused_step_rolls_back_and_the_fixed_push_converges(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    name = f"atomic {uuid.uuid4().hex[:8]}"
    folder = make_package(tmp_path / "pkg", name)
    tasks = _tasks(folder)
    # Only the server can know that this entity does not exist: it refuses the second task's criterion.
    unknown = {"label": "scoped", "assertion": PASSES, "input_entity_id": "ent_01NOSUCHENTITY0000000000"}
    tasks["02-file.yaml"]["criteria"].append(unknown)
    _write(folder, "02-file.yaml", tasks["02-file.yaml"])
    refused = run(cli, "push", str(folder), code=2)
    err = " ".join(refused.stderr.split())
    assert "tasks/02-file.yaml: task 'File the referral': criteria[1]: the server refused it" in err, err
    assert "rolled back" in err
    assert _state(server, name) is None  # no half-made benchmark, no orphan datasets

    del tasks["02-file.yaml"]["criteria"][1]
    _write(folder, "02-file.yaml", tasks["02-file.yaml"])
    run(cli, "push", str(folder))
    pushed = _state(server, name)
    assert pushed == {
        "tasks": {"Call the member": ["no SSN", "disclosures"], "File the referral": ["quiet"]},
        "datasets": sorted(f"{name}: {d}" for d in ("calls", "clinic", "inbox")),
    }

    # An update followed by a refusal is put back too.
    tasks["01-call.yaml"]["criteria"][0]["label"] = "renamed"
    _write(folder, "01-call.yaml", tasks["01-call.yaml"])
    tasks["02-file.yaml"]["criteria"].append(unknown)
    _write(folder, "02-file.yaml", tasks["02-file.yaml"])
    run(cli, "push", str(folder), code=2)
    assert _state(server, name) == pushed
    del tasks["02-file.yaml"]["criteria"][1]
    _write(folder, "02-file.yaml", tasks["02-file.yaml"])
    run(cli, "push", str(folder))
    assert "Nothing to change" in run(cli, "push", str(folder)).stderr


def test_syntax_errors_name_file_line_and_column(cli: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    folder = make_package(tmp_path / "pkg", "syntax")
    (folder / "tasks" / "02-file.yaml").write_text("name: File\ncriteria:\n  - label: a\n  assertion: {}\n")
    err = run(cli, "push", str(folder), code=2).stderr
    assert f"{folder / 'tasks' / '02-file.yaml'}:4:3: cannot read:" in err, err
    (folder / "tasks" / "02-file.yaml").unlink()
    (folder / "tasks" / "03-json.json").write_text('{"name": "x",\n "criteria": [}\n')
    err = run(cli, "push", str(folder), code=2).stderr
    assert f"{folder / 'tasks' / '03-json.json'}:2:15: cannot read:" in err, err


def test_a_missing_dataset_names_every_form_it_may_take(cli: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    folder = make_package(tmp_path / "pkg", "missing")
    (folder / "datasets" / "calls.yaml").unlink()
    err = " ".join(run(cli, "push", str(folder), code=2).stderr.split())
    assert "datasets/calls.yaml" in err and "datasets/calls.fhir.json" in err and "datasets/calls/" in err
