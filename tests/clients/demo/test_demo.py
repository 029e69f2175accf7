"""`assay demo` end to end (in-process service, scripted agent over the real protocols), and the
bundled package's promises: six tasks or more, all six checks, all six surfaces, an agent action
for every task, criteria that parse."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from assay.clients.cli import app
from assay.clients.demo import PACKAGE
from assay.clients.demo.agent import ACTIONS
from assay.clients.demo.runner import _needs
from assay.clients.packages import read_package
from assay.core.assertions import ASSERTION_MODELS, parse_assertion
from assay.sandboxes.registry import SURFACES

EXPECTED = {
    "Book a follow-up with Dr. Rivera": "pass",
    "Record John Smith's new phone number": "fail",  # the seeded telecom.0.system earned an idle agent 0.5 until the self-test gate caught it
    "Tell the lab system about the update (HL7 ADT^A08)": "pass",
    "Check John Smith's eligibility (X12 270/271)": "pass",
    "File the cardiology referral on the SFTP drop": "pass",
    "Request prior authorization for the echocardiogram": "pass",
    "Call John Smith to confirm the visit": "fail",  # identity is a required gate the agent misses
    "Ask ACME Health by phone about the MRI authorization": "pass",
}
SIX_CHECKS = {
    "fhir-resource-state",
    "hl7-structural",
    "portal-state-match",
    "sftp-file-present",
    "voice-call",
    "voice-transcript",
    "x12-response",
}
ALL_SURFACES = {"fhir", "hl7", "x12", "files", "portal", "voice"}


def test_the_package_covers_every_check_and_surface() -> None:
    package = read_package(PACKAGE)
    assert len(package.tasks) >= 6
    assert {task.name for task in package.tasks} == set(ACTIONS) == set(EXPECTED)
    checks = {c["assertion"]["assert"] for task in package.tasks for c in task.criteria}
    assert checks == SIX_CHECKS and set(ASSERTION_MODELS) >= SIX_CHECKS
    assert {s for task in package.tasks for s in _needs(task.body["tags"])} == ALL_SURFACES
    for task in package.tasks:
        for criterion in task.criteria:
            parse_assertion(criterion["assertion"])


def test_demo_runs_the_loop(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--data-dir", str(tmp_path / "demo")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.stdout, result.exception)
    out = result.stdout
    assert "front-office-demo@1" in out and "Where to look next" in out
    for task in read_package(PACKAGE).tasks:
        missing = set(_needs(task.body["tags"])) - set(SURFACES)
        if missing:
            assert f"skipped {task.name!r}" in out
            continue
        line = next(line for line in out.splitlines() if f"  {task.name}  tr_" in line)
        assert re.search(
            rf"{EXPECTED[task.name]} [\d.]+  {re.escape(task.name)}  tr_\w+ · completed", line
        ), line
    assert "telecom.0.value: expected 555-0142, got 555-0124" in out
    assert "the agent gave up" not in out
    # The call task scores 0 though one criterion passed: the tree says which gate, and by how much.
    assert (
        'gated: required criterion #1 "Identity verified before discussing the visit" did not pass, '
        "so the task scores 0; without the gate it would have scored 0.75"
    ) in " ".join(out.split())
    assert "while that server runs" in out
