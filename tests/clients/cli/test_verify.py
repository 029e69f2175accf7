"""`assay verify` through its command-line surface (SPEC §7)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.clients.cli import app
from assay.core.state import VoiceTurn
from assay.snapshot import archive_snapshot, write_snapshot

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "referral-intake"
runner = CliRunner()

VOICE_TASK = {
    "input_entity": {"member_id": "M1"},
    "criteria": [
        {
            "label": "greets",
            "axis": "correctness",
            "weight": 2,
            "assertion": {"assert": "voice-transcript", "contains": ["thank you for calling"]},
        },
        {"assertion": {"assert": "voice-transcript", "not_contains": ["guaranteed approval"]}},
        {"label": "legacy", "assertion": {"assert": "no-such-check", "x": 1}},
    ],
}


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return write_snapshot(
        tmp_path / "snap",
        voice=[VoiceTurn("agent", "Thank you for calling Acme Health."), VoiceTurn("caller", "Hi.")],
    )


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "task.json"
    path.write_text(json.dumps(VOICE_TASK))
    return path


def run(*args: str | Path):
    return runner.invoke(app, ["verify", *map(str, args)])


def test_json_output_has_exactly_the_spec_keys_in_file_order(task_file: Path, snapshot: Path) -> None:
    result = run(task_file, snapshot, "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert list(body) == ["score", "verdict", "axes", "criterion_runs"]
    labels = [c["label"] for c in body["criterion_runs"]]
    assert labels == ["greets", "criterion 2", "legacy"]
    for run_ in body["criterion_runs"]:
        assert list(run_) == ["label", "axis", "weight", "status", "passed", "score", "details", "evidence"]
    legacy = body["criterion_runs"][2]
    assert legacy["passed"] is False and legacy["score"] == 0
    assert legacy["details"].startswith("unsupported assertion:")


def test_unsupported_criterion_never_aborts_the_others(task_file: Path, snapshot: Path) -> None:
    body = json.loads(run(task_file, snapshot, "--json").stdout)
    first, second, _ = body["criterion_runs"]
    assert first["passed"] is True and second["passed"] is True
    # weights 2, 1, 1 with scores 1, 1, 0 → 3/4
    assert body["score"] == pytest.approx(0.75)
    assert body["verdict"] == "partial"
    assert body["axes"]["correctness"] == {"score": 1.0, "weight": 2}
    assert body["axes"]["__default__"] == {"score": 0.5, "weight": 2}


def test_reads_a_tar_gz_and_a_folder_holding_snapshot(
    task_file: Path, snapshot: Path, tmp_path: Path
) -> None:
    expected = json.loads(run(task_file, snapshot, "--json").stdout)["score"]
    archive = tmp_path / "state.tar.gz"
    archive.write_bytes(archive_snapshot(snapshot))
    holder = tmp_path / "holder"
    shutil.copytree(snapshot, holder / "snapshot")
    for target in (archive, holder):
        result = run(task_file, target, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["score"] == expected


def test_table_ends_with_the_verdict_line(task_file: Path, snapshot: Path) -> None:
    result = run(task_file, snapshot)
    assert result.exit_code == 0
    assert result.stdout.rstrip().splitlines()[-1] == "verdict: partial  score: 0.75"


@pytest.mark.parametrize(
    ("make_task", "make_snapshot", "reason"),
    [
        (lambda p: p / "missing.yaml", lambda p: p, "cannot read task file"),
        (lambda p: _write(p / "t.yaml", "criteria: [unclosed"), lambda p: p, "t.yaml:1:20 is not valid YAML"),
        (lambda p: _write(p / "t.json", "{\n not json"), lambda p: p, "t.json:2:2 is not valid JSON"),
        (lambda p: _write(p / "t.yaml", "labels: []"), lambda p: p, "has no `criteria` list"),
        (lambda p: _write(p / "t.yaml", "criteria: []"), lambda p: p / "nope", "snapshot not found"),
        (lambda p: _write(p / "t.yaml", "criteria: []"), lambda p: _write(p / "x.tgz", "junk"), "tar.gz"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(
    tmp_path: Path, make_task, make_snapshot, reason: str
) -> None:
    result = run(make_task(tmp_path), make_snapshot(tmp_path), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and reason in lines[0]


def test_no_criteria_is_a_fail_with_score_zero(tmp_path: Path, snapshot: Path) -> None:
    result = run(_write(tmp_path / "t.yaml", "criteria: []"), snapshot, "--json")
    assert json.loads(result.stdout) == {"score": 0.0, "verdict": "fail", "axes": {}, "criterion_runs": []}


def test_bundled_example_runs(tmp_path: Path) -> None:
    result = run(EXAMPLE / "task.yaml", EXAMPLE / "snapshot", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert len(body["criterion_runs"]) == 7


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_skipped_snapshot_records_are_warned_on_stderr_in_json_mode(task_file: Path, snapshot: Path) -> None:
    (snapshot / "fhir" / "Patient").mkdir(parents=True)
    (snapshot / "fhir" / "Patient" / "broken.json").write_text("{nope")
    result = run(task_file, snapshot, "--json")
    assert result.exit_code == 0
    json.loads(result.stdout)  # stdout stays pure JSON
    assert "warning:" in result.stderr and "broken.json" in result.stderr


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_never_crashes_verify(tmp_path: Path, task_file: Path, snapshot: Path) -> None:
    """A hostile snapshot or task file is a warning or exit 2, never a traceback (RecursionError)."""
    (snapshot / "fhir" / "Patient").mkdir(parents=True)
    (snapshot / "fhir" / "Patient" / "deep.json").write_text(DEEP)
    result = run(task_file, snapshot, "--json")
    assert result.exit_code == 0
    assert "nested too deeply" in result.stderr

    deep_task = _write(tmp_path / "deep.json", DEEP)
    result = run(deep_task, snapshot, "--json")
    assert result.exit_code == 2 and "nested too deeply" in result.stderr


def test_deeply_nested_json_file_fails_the_field_not_the_check(tmp_path: Path) -> None:
    from assay.snapshot import SnapshotFile

    snap = write_snapshot(tmp_path / "s", files=[SnapshotFile("out/deep.json", DEEP.encode())])
    task = {
        "criteria": [
            {
                "assertion": {
                    "assert": "sftp-file-present",
                    "path": "out/deep.json",
                    "parse_json": True,
                    "fields": [{"path": "a", "expected": 1}],
                }
            }
        ]
    }
    task_path = _write(tmp_path / "t.json", json.dumps(task))
    (criterion,) = json.loads(run(task_path, snap, "--json").stdout)["criterion_runs"]
    assert criterion["status"] == "ok" and criterion["score"] == 0
    assert "nested too deeply" in criterion["details"]


def test_the_assay_command_starts_without_the_service_stack() -> None:
    """`assay verify` is offline: `serve`, `keys` and `fhir-server` import the service when they
    run, and `serve` its listener port flags from the surface registry when it is parsed, so
    starting `assay` (or listing its commands) loads no web framework, ORM, HTTP client or surface."""
    probe = (
        "import sys, contextlib, io, assay.clients.cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    assay.clients.cli.app(['--help'])\n"
        "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'sqlalchemy', 'httpx', 'asyncssh', "
        "'assay.sandboxes') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_verify_without_a_judge_loads_no_http_client(task_file: Path, snapshot: Path) -> None:
    """The judge's HTTP client is imported only when `ASSAY_JUDGE_URL` configures a judge (httpx
    cost `assay verify` 0.2-0.4 s of start-up on every run; issue 9)."""
    probe = (
        "import sys\n"
        "from assay.clients.cli.app import app\n"
        f"sys.argv = ['assay', 'verify', {str(task_file)!r}, {str(snapshot)!r}, '--json']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print('httpx' in sys.modules, file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_JUDGE")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert json.loads(done.stdout)["verdict"] and done.stderr.strip().endswith("False")


@pytest.mark.parametrize("as_json", [True, False])
def test_the_command_exits_at_once_with_every_line_written(
    task_file: Path, snapshot: Path, as_json: bool
) -> None:
    """As the `assay` command, verify ends the process without freeing the loaded state (issue 9):
    the output, the warnings and the exit code are those of a normal exit, through pipes too."""
    (snapshot / "fhir" / "Patient").mkdir(parents=True)
    (snapshot / "fhir" / "Patient" / "broken.json").write_text("{nope")
    command = [sys.executable, "-c", "from assay.clients.cli import main; main()", "verify"]
    done = subprocess.run(
        [*command, str(task_file), str(snapshot), *(["--json"] if as_json else [])],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    in_process = run(task_file, snapshot, *(["--json"] if as_json else []))
    if as_json:
        assert json.loads(done.stdout) == json.loads(in_process.stdout)
    else:
        assert done.stdout.rstrip().splitlines()[-1] == in_process.stdout.rstrip().splitlines()[-1]
        assert done.stdout.rstrip().splitlines()[-1].startswith("verdict: ")
    assert "warning:" in done.stderr and "broken.json" in done.stderr


def test_a_folder_given_as_the_task_file_says_so(tmp_path: Path, snapshot: Path) -> None:
    (tmp_path / "pkg" / "tasks").mkdir(parents=True)
    (tmp_path / "pkg" / "tasks" / "01-book.yaml").write_text("criteria: []\n")
    result = run(tmp_path / "pkg", snapshot)
    assert result.exit_code == 2
    assert "is a folder: give one task's YAML or JSON file, e.g. " in result.stderr
    assert str(tmp_path / "pkg" / "tasks" / "01-book.yaml") in result.stderr and "Errno" not in result.stderr
