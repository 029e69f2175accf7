"""An eighth surface from the recipe alone: one package (`eighth_surface/`) and one registry line.

It runs through the real service end to end — dataset, start, write, complete, the state tar.gz,
`assay verify` — on SQLite and PostgreSQL, with nothing else of the service naming it; and the
commands it reaches through the registry know it too: `assay push`/`pull` read and write its bare
dataset form, `assay serve` has a flag for a listener port it declares.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from assay.clients.cli import app
from assay.sandboxes import registry
from assay.sandboxes.options import Option, not_negative
from assay.service.settings import Settings
from tests.service.builders import error, ok, start_run, unique
from tests.service.conftest import Server, serving

from .eighth_surface import NotesSandbox

Json = dict[str, Any]
UNCHANGED = {"assert": "no-unexpected-changes", "surfaces": ["notes"]}


@pytest.fixture
def notes_surface() -> Iterator[None]:
    registry.register(NotesSandbox())  # the registry line
    try:
        yield
    finally:
        registry.unregister("notes")


@pytest.fixture
def notes_server(server: Server, notes_surface: None) -> Iterator[Server]:
    """A server built after the registry line, so it mounts the surface's routes."""
    # Its settings section, as `ASSAY_NOTES_MAX_LENGTH=20` gives it.
    section = Settings.from_env({"ASSAY_NOTES_MAX_LENGTH": "20"}).surface_settings
    with serving(server, surface_settings=section) as fresh:
        yield fresh


def test_an_eighth_surface_runs_end_to_end(notes_server: Server, tmp_path: Path) -> None:
    with notes_server.client() as api:
        refused = api.post("/datasets", json={"name": unique("n"), "type": "notes", "data": {"notes": [1]}})
        assert error(refused, 422, "VALIDATION_ERROR") == {"data.notes": ["must be an array of strings"]}
        dataset = ok(
            api.post("/datasets", json={"name": unique("n"), "type": "notes", "data": {"notes": ["seeded"]}}),
            201,
        )
        benchmark = ok(api.post("/benchmarks", json={"name": unique("notes")}), 201)
        task = ok(
            api.post(
                "/tasks", json={"benchmark_id": benchmark["id"], "name": "t", "dataset_ids": [dataset["id"]]}
            ),
            201,
        )
        criterion = {"task_id": task["id"], "label": "unchanged", "assertion": UNCHANGED}
        ok(api.post("/criteria", json=criterion), 201)
        run = start_run(api, benchmark["id"])
        [task_run] = run.task_runs
        with notes_server.client(run.token) as agent:
            started = ok(agent.post(task_run["start_url"]))
            base = started["endpoints"]["notes"]
            too_long = agent.post(f"{base}/write", json={"text": "x" * 21})
            assert error(too_long, 422, "VALIDATION_ERROR") == {"text": ["a note is at most 20 characters"]}
            assert ok(agent.post(f"{base}/write", json={"text": "the agent's note"}), 201) == {"note": 2}
            completed = ok(agent.post(task_run["complete_url"]))
            error(agent.post(f"{base}/write", json={"text": "too late"}), 409, "CONFLICT")

        [check] = completed["checks"]
        assert completed["verdict"] == "fail"
        assert [(c["surface"], c["change"], c["key"]) for c in check["evidence"]["unexpected"]] == [
            ("notes", "created", "2.txt")
        ]
        state = api.get(f"/task-runs/{task_run['id']}/state")
        assert state.status_code == 200, state.text

    with httpx.Client(base_url=notes_server.url, timeout=60) as viewer:  # its part of the viewer
        signed_in = viewer.post("/ui/login", data={"api_key": notes_server.org_key, "next": "/ui/runs"})
        assert signed_in.status_code == 303, signed_in.text
        page = viewer.get(f"/ui/task-runs/{task_run['id']}").text
    assert '<span class="tag">notes-agent</span> the agent&#39;s note' in page

    archive = tmp_path / "state.tar.gz"
    archive.write_bytes(state.content)
    with tarfile.open(fileobj=io.BytesIO(state.content)) as tar:
        notes = {n: tar.extractfile(n).read() for n in tar.getnames() if "/notes/" in n}  # type: ignore[union-attr]
        baseline = json.loads(tar.extractfile("snapshot/baseline.json").read())  # type: ignore[union-attr]
    assert notes == {"snapshot/notes/1.txt": b"seeded", "snapshot/notes/2.txt": b"the agent's note"}
    assert list(baseline["notes"]) == ["1.txt"]

    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps({"criteria": [{"label": "unchanged", "assertion": UNCHANGED}]}))
    result = CliRunner().invoke(app, ["verify", str(task_file), str(archive), "--json"])
    assert result.exit_code == 0, result.output
    verified: Json = json.loads(result.stdout)
    assert verified["verdict"] == "fail"
    assert verified["criterion_runs"][0]["evidence"] == check["evidence"]


def test_a_surface_name_no_surface_has_is_refused_at_create(notes_server: Server) -> None:
    registry.unregister("notes")
    with notes_server.client() as api:
        benchmark = ok(api.post("/benchmarks", json={"name": unique("notes")}), 201)
        task = ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
        refused = api.post("/criteria", json={"task_id": task["id"], "label": "u", "assertion": UNCHANGED})
        assert "'notes' is not a surface" in str(error(refused, 422, "VALIDATION_ERROR"))
        dataset = api.post("/datasets", json={"name": unique("n"), "type": "notes", "data": {"notes": []}})
        assert error(dataset, 422, "VALIDATION_ERROR") == {
            "type": ["dataset type 'notes' is not one of fhir, files, hl7, portal, voice, x12"]
        }
    registry.register(NotesSandbox())


def test_a_surface_setting_of_the_wrong_type_is_refused_naming_its_variable(notes_surface: None) -> None:
    with pytest.raises(ValueError, match="ASSAY_NOTES_MAX_LENGTH must be an integer, got 'long'"):
        Settings.from_env({"ASSAY_NOTES_MAX_LENGTH": "long"})
    assert Settings.from_env({}).surface_settings == {}


def test_a_package_holds_its_dataset_in_the_form_it_declares(
    notes_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("ASSAY_API_KEY", notes_server.org_key)
    monkeypatch.setenv("ASSAY_BASE_URL", notes_server.url)
    name, seed = unique("notes package"), unique("seed").replace(" ", "-")
    package = tmp_path / "package"
    (package / "tasks").mkdir(parents=True)
    (package / "datasets").mkdir()
    (package / "benchmark.yaml").write_text(json.dumps({"name": name, "environment": {"datasets": [seed]}}))
    (package / "tasks" / "t.json").write_text(
        json.dumps({"name": "t", "criteria": [{"label": "unchanged", "assertion": UNCHANGED}]})
    )
    (package / "datasets" / f"{seed}.notes.json").write_text(json.dumps({"notes": ["seeded"]}))

    pushed = CliRunner().invoke(app, ["push", str(package), "--json"])
    assert pushed.exit_code == 0, pushed.output
    assert f"dataset {seed}" in json.loads(pushed.stdout)["created"]

    pulled = tmp_path / "pulled"
    result = CliRunner().invoke(app, ["pull", name, str(pulled)])
    assert result.exit_code == 0, result.output
    assert json.loads((pulled / "datasets" / f"{seed}.notes.json").read_text()) == {"notes": ["seeded"]}


class ListeningNotes(NotesSandbox):
    """`notes` declaring a listener port, as a surface with a protocol server of its own does."""

    options = {**NotesSandbox.options, "port": Option(int, 0, check=not_negative)}


def test_a_listener_port_it_declares_is_a_serve_flag(tmp_path: Path) -> None:
    registry.register(ListeningNotes())
    try:
        shown = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
        assert "--notes-port" in shown.stdout and "ASSAY_NOTES_PORT" in shown.stdout
        env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
        env |= {"ASSAY_LISTENERS": "0", "ASSAY_NOTES_PORT": "4000"}
        # The flag is the variable: port 0, which an instance without listeners cannot name.
        refused = CliRunner().invoke(
            app, ["serve", "--data-dir", str(tmp_path), "--notes-port", "0"], env=env
        )
    finally:
        registry.unregister("notes")
    assert refused.exit_code == 2
    assert (
        "ASSAY_LISTENERS=0 needs ASSAY_MLLP_PORT and ASSAY_SFTP_PORT and ASSAY_NOTES_PORT" in refused.output
    )
