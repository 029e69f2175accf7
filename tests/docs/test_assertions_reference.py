"""`docs/assertions.md` runs as written: every block tagged `example` is scored by `verify_task`
against the fixture state it names and gives the verdict it names; the blocks hold exactly the
assertions of `assay.core.assertions.examples` (what `/openapi.json` shows), one type at least
each, so the reference, the API schema and the engine cannot disagree."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.core.assertions import ASSERTION_MODELS, parse_assertion
from assay.core.assertions.examples import EXAMPLES
from assay.core.state import PortalRow, SandboxState, VoiceTurn, X12Record, resource_digest
from assay.snapshot import open_snapshot, write_snapshot
from assay.snapshot.writer import SnapshotFile, SnapshotWriter
from assay.verify import CriterionSpec, verify_task
from tests.conftest import FIXTURES

DOCS = Path(__file__).parents[2] / "docs"
DOC = DOCS / "assertions.md"
_BLOCK = re.compile(
    r"^```yaml example state=(?P<state>[\w-]+) verdict=(?P<verdict>\w+)\n(?P<body>.*?)^```", re.S | re.M
)


def examples() -> list[tuple[str, str, dict[str, Any]]]:
    return [(m["state"], m["verdict"], yaml.safe_load(m["body"])) for m in _BLOCK.finditer(DOC.read_text())]


def _voice_turns() -> list[VoiceTurn]:
    with (FIXTURES / "voice/mts-dialog/MTS-Dialog-ValidationSet.csv").open(encoding="utf-8") as handle:
        dialogue = next(csv.DictReader(handle))["dialogue"]
    speakers = {"doctor": "agent", "patient": "caller"}
    turns = []
    for line in dialogue.splitlines():
        role, _, text = line.strip().partition(": ")
        if role.casefold() in speakers:
            turns.append(VoiceTurn(speakers[role.casefold()], text))
    return turns


def _states(root: Path) -> dict[str, SandboxState]:
    """The states the doc's table "The example states" describes."""
    patient = json.loads((FIXTURES / "fhir/r4-examples/Patient-example.json").read_text())
    x12 = FIXTURES / "x12"
    exchanges = [
        X12Record(
            1,
            (x12 / "linuxforhealth/271_005010X279A1/subscriber-health-benefit-check.271").read_text(),
            request=(x12 / "linuxforhealth/270_005010X279A1/subscriber-health-benefit-check.270").read_text(),
        ),
        X12Record(2, (x12 / "herophilus/278DVSResponseSample.txt").read_text()),
    ]
    row = {
        "member_id": "M123456",
        "patient": {"member_id": "M123456", "name": "John Smith"},
        "procedure_code": "93306",
        "diagnosis_codes": ["R07.89"],
        "status": "approved",
    }
    changed = SnapshotWriter(root / "fhir-changed", {})
    changed.add_baseline("fhir", {"Patient/example": resource_digest(patient)})
    home = {"system": "phone", "value": "555-0142", "use": "home"}
    changed.add_fhir([{**patient, "telecom": [*patient["telecom"], home]}])
    files = [
        SnapshotFile(
            "outbox/reports/ReportingExample.csv",
            (FIXTURES / "sftp/herophilus/ReportingExample.csv").read_bytes(),
        ),
        SnapshotFile(
            "outbox/patient.json", (FIXTURES / "fhir/misc/fhir-converter_ExamplePatient.json").read_bytes()
        ),
    ]
    adt = (FIXTURES / "hl7v2/cdc-trusted-intermediary/Other__001_ADT_A01.hl7").read_text()
    written = {
        "fhir": write_snapshot(root / "fhir", fhir=[patient]),
        "fhir-changed": changed.close(),
        "hl7": write_snapshot(root / "hl7", hl7=[adt]),
        "x12": write_snapshot(root / "x12", x12=exchanges),
        "portal": write_snapshot(
            root / "portal",
            manifest={"input_entity": {"member_id": "M123456"}},
            portal=[PortalRow(1, "prior_auth_requests", row, portal="acme")],
        ),
        "files": write_snapshot(root / "files", files=files),
        "voice": write_snapshot(root / "voice", voice=_voice_turns()),
    }
    return {name: open_snapshot(path) for name, path in written.items()}


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SandboxState]:
    return _states(tmp_path_factory.mktemp("states"))


@pytest.mark.parametrize(
    ("state", "verdict", "assertion"),
    examples(),
    ids=[f"{i}-{a.get('assert')}" for i, (_, _, a) in enumerate(examples())],
)
def test_example_gives_its_verdict(
    states: dict[str, SandboxState], state: str, verdict: str, assertion: dict[str, Any]
) -> None:
    parse_assertion(assertion)  # valid at create, not only at verify
    (run,) = verify_task([CriterionSpec(assertion, label="example")], states[state]).runs
    result = run.result
    assert result.status == "ok", result.details
    found = (
        "unsupported"
        if result.details.startswith("unsupported assertion")
        else ("pass" if result.passed else "fail")
    )
    assert found == verdict, (result.details, result.evidence)


def test_doc_shows_every_type_and_exactly_the_schema_examples() -> None:
    shown = [assertion for _, _, assertion in examples()]
    source = [assertion for group in EXAMPLES.values() for assertion in group]
    assert sorted(map(json.dumps, shown)) == sorted(map(json.dumps, source))
    assert {a["assert"] for a in shown} == set(ASSERTION_MODELS) == set(EXAMPLES)
    assert all(a["assert"] == tag for tag, group in EXAMPLES.items() for a in group)


def test_every_x12_path_in_the_docs_and_demo_parses() -> None:
    """A path form shown anywhere for authors is one the grammar accepts."""
    from assay.formats.x12 import X12Path

    texts = [p.read_text() for p in DOCS.glob("*.md")]
    texts += [p.read_text() for p in (Path(__file__).parents[2] / "src/assay/clients/demo").rglob("*.yaml")]
    paths = {
        m for text in texts for m in re.findall(r"\b[0-9]{4}[A-Z]{0,2}/[A-Z][A-Z0-9]{1,2}[^\s\"'`,}]*", text)
    }
    assert paths
    for path in paths:
        X12Path.parse(path)


def test_docs_count_the_assertion_types_as_the_registry_does() -> None:
    words = {6: "six", 7: "seven", 8: "eight", 9: "nine"}
    count = len(ASSERTION_MODELS)
    for page in [*DOCS.glob("*.md"), DOCS.parent / "README.md"]:
        text = page.read_text()
        for number, word in words.items():
            if number == count:
                continue
            wrong = re.search(rf"\b({word}|{number})\s+(assertion\s+(types|shapes)|checks)\b", text, re.I)
            assert wrong is None, f"{page.name}: {wrong.group(0)!r}, the registry has {count}"
        assert not re.search(r"the (seventh|sixth) check", text, re.I), page.name
