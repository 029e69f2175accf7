"""A benchmark package with its own voice vocabulary: validated at push, frozen with the published
version and each task run, so `complete`, `rescore` and `assay verify` judge with the same lexicon
even after the draft's vocabulary changes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml
from typer.testing import CliRunner

from assay.client import Assay
from tests.clients.cli.test_commands import cli, run  # noqa: F401  (fixture)
from tests.service.conftest import Server

OWN = [{"id": "sunrise", "terms": ["Sunrise Health Plan", "SHP"], "source": "Sunrise member handbook, p. 2"}]
SAID = "Thanks for calling SHP. Can I have the member's DOB, please?"


def make_package(folder: Path, name: str, vocabulary: Any) -> Path:
    (folder / "tasks").mkdir(parents=True)
    (folder / "datasets").mkdir()
    manifest = {"name": name, "environment": {"datasets": ["calls"]}, "vocabulary": vocabulary}
    (folder / "benchmark.yaml").write_text(yaml.safe_dump(manifest))
    (folder / "datasets" / "calls.yaml").write_text(yaml.safe_dump({"type": "voice", "data": {"turns": []}}))
    criterion = {
        "assert": "voice-transcript",
        "speaker": "agent",
        "contains": ["Sunrise Health Plan", "date of birth"],
    }
    task = {"name": "Greet the member", "criteria": [{"label": "greeting", "assertion": criterion}]}
    (folder / "tasks" / "01-greet.yaml").write_text(yaml.safe_dump(task))
    return folder


def test_a_package_vocabulary_is_pushed_published_and_rescored_with_the_frozen_lexicon(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    name = f"vocab {uuid.uuid4().hex[:8]}"
    folder = make_package(tmp_path / "pkg", name, OWN)
    run(cli, "push", str(folder), "--publish", "--force")
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        benchmark = next(b for b in client.benchmarks.list() if b.name == name)
        assert benchmark.vocabulary == OWN
        created = client.benchmark_runs.create(benchmark=f"{benchmark.slug}@1")
        (task_run,) = created.task_runs
        client.task_runs.start(task_run.id, run_token=created.bearer_token)
    agent = {"Authorization": f"Bearer {created.bearer_token}"}
    base = f"{server.url}/v1/task-runs/{task_run.id}"
    said = httpx.post(f"{base}/voice/turns", json={"speaker": "agent", "text": SAID}, headers=agent)
    assert said.status_code == 201, said.text
    done = httpx.post(f"{base}/complete", headers=agent)
    assert done.status_code == 200, done.text

    org = {"Authorization": f"Bearer {server.org_key}"}
    shown = httpx.get(f"{server.url}/task-runs/{task_run.id}", headers=org).json()
    assert shown["snapshot"]["vocabulary"] == OWN
    first = httpx.get(
        f"{server.url}/criterion-runs", params={"task_run_id": task_run.id}, headers=org
    ).json()["data"]
    plan, dob = first[0]["evidence"]["phraseResults"]
    assert first[0]["passed"] is True
    assert plan["method"] == "vocabulary" and plan["vocabulary"]["entries"] == ["sunrise"]
    assert dob["vocabulary"]["entries"] == ["date-of-birth"]
    assert first[0]["evidence"]["vocabulary"]["benchmarkEntries"] == 1

    # The draft loses its vocabulary; the published run keeps judging with the frozen one.
    manifest = yaml.safe_load((folder / "benchmark.yaml").read_text())
    manifest["vocabulary"] = [{"terms": ["Moonrise Care", "MC"], "source": "another handbook"}]
    (folder / "benchmark.yaml").write_text(yaml.safe_dump(manifest))
    pushed = json.loads(run(cli, "push", str(folder), "--json").stdout)
    assert pushed["updated"] == [f"benchmark {name}"]
    rescored = httpx.post(f"{server.url}/task-runs/{task_run.id}/rescore", headers=org)
    assert rescored.status_code == 200, rescored.text
    again = httpx.get(
        f"{server.url}/criterion-runs", params={"task_run_id": task_run.id}, headers=org
    ).json()["data"]
    current = [row for row in again if not row["superseded"]]
    assert len(current) == 1 and current[0]["passed"] is True
    assert current[0]["evidence"]["phraseResults"][0]["vocabulary"]["entries"] == ["sunrise"]

    # `assay verify` on the task run and its state reads the same frozen vocabulary.
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        (tmp_path / "task-run.json").write_text(client.task_runs.get(task_run.id).model_dump_json())
        (tmp_path / "state.tar.gz").write_bytes(client.task_runs.state(task_run.id))
    verified = json.loads(
        run(cli, "verify", str(tmp_path / "task-run.json"), str(tmp_path / "state.tar.gz"), "--json").stdout
    )
    assert verified["verdict"] == "pass"
    assert verified["criterion_runs"][0]["evidence"]["phraseResults"][0]["vocabulary"]["entries"] == [
        "sunrise"
    ]

    # A new version freezes the new vocabulary: the old term is no longer the plan's name.
    run(cli, "publish", str(folder), "--force")
    with Assay(api_key=server.org_key, base_url=server.url) as client:
        second = client.benchmark_runs.create(benchmark=f"{benchmark.slug}@2")
    assert (
        httpx.get(f"{server.url}/task-runs/{second.task_runs[0].id}", headers=org).json()["snapshot"][
            "vocabulary"
        ]
        == manifest["vocabulary"]
    )

    pulled = tmp_path / "pulled"
    run(cli, "pull", name, str(pulled))
    assert yaml.safe_load((pulled / "benchmark.yaml").read_text())["vocabulary"] == manifest["vocabulary"]


def test_a_bad_vocabulary_is_refused_at_push_and_by_the_api(
    cli: CliRunner,  # noqa: F811
    server: Server,
    tmp_path: Path,
) -> None:
    folder = make_package(tmp_path / "bad", f"bad {uuid.uuid4().hex[:8]}", [{"terms": ["SHP", "Sunrise"]}])
    refused = run(cli, "push", str(folder), code=2)
    assert "benchmark.yaml" in refused.stderr and "vocabulary.0.source" in refused.stderr

    org = {"Authorization": f"Bearer {server.org_key}"}
    body = {
        "name": f"api {uuid.uuid4().hex[:8]}",
        "vocabulary": [{"terms": ["not covered", "x"], "source": "s"}],
    }
    answer = httpx.post(f"{server.url}/benchmarks", json=body, headers=org)
    assert answer.status_code == 422, answer.text
    assert "vocabulary.0.terms.0" in json.dumps(answer.json())
    made = httpx.post(f"{server.url}/benchmarks", json={**body, "vocabulary": OWN}, headers=org)
    assert made.status_code == 201 and made.json()["vocabulary"] == OWN
    patched = httpx.patch(
        f"{server.url}/benchmarks/{made.json()['id']}", json={"vocabulary": [{"terms": []}]}, headers=org
    )
    assert patched.status_code == 422 and "vocabulary.0" in json.dumps(patched.json())
    kept = httpx.get(f"{server.url}/benchmarks/{made.json()['id']}", headers=org).json()
    assert kept["vocabulary"] == OWN
