"""`hl7-structural` end to end: snapshots of real messages scored by `verify_task` (SPEC §3.3)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import FIXTURES
from typer.testing import CliRunner

from assay.checks import CHECKS
from assay.checks import hl7_structural as check_module
from assay.clients.cli import app
from assay.core.assertions import parse_assertion
from assay.core.assertions.hl7 import CORRELATION_ALIASES
from assay.core.errors import AssertionInvalid
from assay.core.results import CriterionResult
from assay.core.state import Hl7Record
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

HL7 = FIXTURES / "hl7v2"
ADT_A04 = (HL7 / "fhir-converter/ADT-A04-01.hl7").read_text(encoding="utf-8")
ORU_R01 = (HL7 / "fhir-converter/ORU-R01-01.hl7").read_text(encoding="utf-8")
SIU_S12 = (HL7 / "fhir-converter/SIU-S12-01.hl7").read_text(encoding="utf-8")
ORM_O01 = (HL7 / "fhir-converter/ORM-O01-01.hl7").read_text(encoding="utf-8")  # starts with a BOM
BATCH = (HL7 / "python-hl7/sample_file1.hl7").read_text(encoding="utf-8")  # FHS/BHS, 3 messages
NULLS = (HL7 / "python-hl7/sample_msh.hl7").read_text(encoding="utf-8")
CRLF = (HL7 / "rethinkhealth/edge-crlf-line-endings.hl7").read_text(encoding="utf-8")
ZSEG = (HL7 / "rethinkhealth/edge-z-segments.hl7").read_text(encoding="utf-8")
BROKEN = (HL7 / "rethinkhealth/invalid-missing-msh.hl7").read_text(encoding="utf-8")


def hl7(*fields: tuple[str, Any], **keys: Any) -> dict[str, Any]:
    assertion: dict[str, Any] = {"assert": "hl7-structural", **keys}
    if fields:
        assertion["fields"] = [{"path": path, "expected": expected} for path, expected in fields]
    return assertion


def score(
    tmp_path: Path, messages: Sequence[str | Hl7Record], *assertions: dict[str, Any]
) -> list[CriterionResult]:
    state = open_snapshot(write_snapshot(tmp_path / "snap", hl7=messages))
    verification = verify_task([CriterionSpec(a, label=f"c{i}") for i, a in enumerate(assertions)], state)
    results = [run.result for run in verification.runs]
    assert all(r.status == "ok" for r in results), [r.details for r in results]
    return results


def test_registered_under_its_tag() -> None:
    assert CHECKS["hl7-structural"] is check_module.check
    assert set(check_module._ALIASES) == set(CORRELATION_ALIASES)


def test_known_values_of_real_adt_oru_siu_orm(tmp_path: Path) -> None:
    results = score(
        tmp_path,
        [ADT_A04, ORU_R01, SIU_S12, ORM_O01],
        hl7(
            ("PID.5.2", "ADAM"),
            ("PID.3[2].1", "123456789"),
            ("PID.5.1.5", "Aniston"),
            ("PV1.14", "NHS Provider-General (inc.A&E-this Hosp)"),
            correlate_by={"message_type": "ADT^A04"},
        ),
        hl7(
            ("PID.5.1", "Finn"),
            ("OBX.3.1", "8867-4"),
            ("OBR.4.2", "Bacteria identified in Stool by Culture"),
            correlate_by={"trigger_event": "R01"},
        ),
        hl7(
            ("SCH.1", "12345"),
            ("SCH.7", "EMERGENCY"),
            ("AIS.3.2", "Biopsy of colon (procedure)"),
            correlate_by={"MSH.9.1": "SIU"},
        ),
        hl7(
            ("ORC.1", "NW"),
            ("OBR.4.1", "24725-4"),
            ("AL1.3.2", "PENICILLIN"),
            correlate_by={"control_id": "MSG00018"},
        ),
    )
    assert [r.score for r in results] == [1, 1, 1, 1]
    adt, oru, siu, orm = results
    assert adt.details == "ADT^A04 message 1 matched; 4 of 4 field assertions passed."
    assert oru.details.startswith("ORU^R01 message 2 matched;")
    assert siu.details.startswith("SIU^S12 message 3 matched;")
    assert orm.details == "ORM^O01 message 4 matched; 3 of 3 field assertions passed."
    assert orm.evidence["control_id"] == "MSG00018"


def test_evidence_has_exactly_the_spec_keys(tmp_path: Path) -> None:
    record = Hl7Record(seq=1, message=ADT_A04, event_id="evt_01ABC")
    (result,) = score(
        tmp_path,
        [record],
        {"assert": "hl7-structural", "fields": [{"path": "PID.8", "expected": "F", "operator": "notEquals"}]},
    )
    assert result.evidence == {
        "field_results": [
            {"path": "PID.8", "expected": "F", "actual": "M", "passed": True, "operator": "notEquals"}
        ],
        "event_id": "evt_01ABC",
        "control_id": "MSG00001",
    }


def test_failed_fields_score_the_fraction(tmp_path: Path) -> None:
    (result,) = score(
        tmp_path, [ADT_A04], hl7(("PID.5.2", "ADAM"), ("PID.5.1.1", "NOBODY"), ("PID.99", None))
    )
    assert result.score == pytest.approx(2 / 3)
    assert not result.passed
    assert result.details == "ADT^A04 message 1 matched; 2 of 3 field assertions passed."
    entries = result.evidence["field_results"]
    assert entries[1] == {"path": "PID.5.1.1", "expected": "NOBODY", "actual": "EVERYMAN", "passed": False}
    assert entries[2]["actual"] is None and entries[2]["passed"] is True


def test_no_match_names_the_selector_and_lists_fields_absent(tmp_path: Path) -> None:
    (result,) = score(tmp_path, [ADT_A04], hl7(("PID.5.2", "ADAM"), correlate_by={"message_type": "ORU^R01"}))
    assert result.score == 0
    assert result.details.startswith("No HL7 message matched message_type=ORU^R01.")
    assert "ADT^A04 message 1" in result.details
    assert result.evidence == {
        "field_results": [{"path": "PID.5.2", "expected": "ADAM", "actual": None, "passed": False}],
        "event_id": None,
        "control_id": None,
    }


def test_no_outbound_messages(tmp_path: Path) -> None:
    (result,) = score(tmp_path, [], hl7())
    assert result.score == 0
    assert "No outbound HL7 message was sent." in result.details


def test_all_correlate_keys_must_hold(tmp_path: Path) -> None:
    both = {"message_type": "ADT^A04", "control_id": "MSG00001", "PID-3.1": "PATID1234"}
    one_wrong = {**both, "control_id": "OTHER"}
    ok, missed = score(tmp_path, [ADT_A04, ORU_R01], hl7(correlate_by=both), hl7(correlate_by=one_wrong))
    assert ok.score == 1 and ok.details == "ADT^A04 message 1 matched; 0 of 0 field assertions passed."
    assert missed.score == 0
    assert missed.details.startswith(
        "No HL7 message matched message_type=ADT^A04, control_id=OTHER, PID-3.1=PATID1234."
    )


def _adt(control_id: str, family: str) -> str:
    return (
        f"MSH|^~\\&|REG|HOSP|EHR|HOSP|20260301120000||ADT^A04^ADT_A01|{control_id}|P|2.5.1\r"
        f"PID|1||MRN1^^^HOSP^MR||{family}^JANE\r"
    )


def test_match_modes(tmp_path: Path) -> None:
    messages = [_adt("C1", "DOE"), _adt("C2", "ROE"), _adt("C3", "DOE")]
    wanted = ("PID.5.1", "ROE")
    any_, first, latest, all_ = score(
        tmp_path,
        messages,
        hl7(wanted, match="any"),
        hl7(wanted, match="first"),
        hl7(wanted, match="latest"),
        hl7(wanted, match="all"),
    )
    assert any_.score == 1 and any_.evidence["control_id"] == "C2"
    assert first.score == 0 and first.evidence["control_id"] == "C1"
    assert latest.score == 0 and latest.evidence["control_id"] == "C3"
    assert all_.score == 0 and all_.evidence["control_id"] == "C3"  # lowest score, ties to the latest


def test_any_ties_go_to_the_latest(tmp_path: Path) -> None:
    (result,) = score(tmp_path, [_adt("C1", "DOE"), _adt("C2", "DOE")], hl7(("PID.5.1", "DOE")))
    assert result.evidence["control_id"] == "C2"


def test_each_message_of_a_batch_is_a_candidate(tmp_path: Path) -> None:
    first, second, latest = score(
        tmp_path,
        [BATCH],
        hl7(correlate_by={"control_id": "12334456778890"}, match="first"),
        hl7(correlate_by={"control_id": "12334456778891"}),
        hl7(correlate_by={"message_type": "ADT^A04"}, match="latest"),
    )
    assert first.details == "ADT^A04 message 1 (batch item 1) matched; 0 of 0 field assertions passed."
    assert second.details.startswith("ADT^A04 message 1 (batch item 2) matched")
    assert latest.details.startswith("ADT^A04 message 1 (batch item 3) matched")


def test_explicit_null_reads_as_none(tmp_path: Path) -> None:
    results = score(
        tmp_path,
        [NULLS],
        hl7(("PV1.9", None)),
        {"assert": "hl7-structural", "fields": [{"path": "PV1.9", "operator": "exists"}]},
        {"assert": "hl7-structural", "fields": [{"path": "PV1.9", "operator": "empty"}]},
        {"assert": "hl7-structural", "fields": [{"path": "PV1.6", "operator": "exists"}]},
    )
    assert [r.score for r in results] == [1, 1, 1, 0]
    assert results[0].evidence["field_results"][0]["actual"] is None


def test_crlf_bom_z_segments_and_escapes(tmp_path: Path) -> None:
    crlf, bom, zseg, escaped = score(
        tmp_path,
        [CRLF, ORM_O01, ZSEG, ADT_A04],
        hl7(("PV1.3.1", "ICU"), correlate_by={"control_id": "MSG006"}),
        hl7(("MSH.3", "ORDApp"), correlate_by={"message_type": "ORM^O01"}),
        hl7(("ZVN.3.3", "VALUE3"), ("ZPD.4", "EXTENDED_FIELD_3"), correlate_by={"control_id": "MSG003"}),
        hl7(("PV1.14", "NHS Provider-General (inc.A&E-this Hosp)"), correlate_by={"control_id": "MSG00001"}),
    )
    assert [r.score for r in (crlf, bom, zseg, escaped)] == [1, 1, 1, 1]


def test_custom_delimiters(tmp_path: Path) -> None:
    """`#S#` decodes to this message's own component separator, `@` (HL7 v2.5.1 §2.7.1)."""
    raw = "MSH!@*#%!SEND!FAC!RECV!FAC!20260101!!ORU@R01!C9!P!2.5\rOBX!1!ST!CODE@Name#S#x!!5.2!mg%L"
    (result,) = score(
        tmp_path,
        [raw],
        hl7(
            ("OBX.3.2", "Name@x"), ("OBX.5", "5.2"), ("OBX.5", 5.2), correlate_by={"message_type": "ORU^R01"}
        ),
    )
    assert result.score == 1


def test_unparseable_messages_are_not_candidates(tmp_path: Path) -> None:
    ok, missing = score(
        tmp_path,
        [BROKEN, ADT_A04],
        hl7(("PID.5.2", "ADAM")),
        hl7(correlate_by={"message_type": "ORU^R01"}),
    )
    assert ok.score == 1 and ok.details.startswith("ADT^A04 message 2 matched")
    assert missing.score == 0
    assert (
        "Some stored messages do not parse: message 1: PID segment before any message header"
        in missing.details
    )


def test_when_no_message_parses_details_carry_the_errors(tmp_path: Path) -> None:
    (result,) = score(tmp_path, [BROKEN, "", "MSH|"], hl7(("PID.5.1", "DOE")))
    assert result.score == 0 and not result.passed
    assert result.details.startswith(
        "No HL7 message matched correlate_by {}. None of the stored messages parses:"
    )
    assert "message 1: PID segment before any message header (MSH) (segment 1, PID)" in result.details
    assert "message 2: empty input" in result.details
    assert "message 3: MSH is truncated or invalid: no encoding characters (MSH-2)" in result.details
    assert result.evidence["field_results"] == [
        {"path": "PID.5.1", "expected": "DOE", "actual": None, "passed": False}
    ]


@pytest.mark.parametrize(
    ("assertion", "key"),
    [
        (hl7(("PID..5", "x")), "fields.0.path"),
        (hl7(("PID.0", "x")), "fields.0.path"),
        (hl7(correlate_by={"messagetype": "ADT^A04"}), "correlate_by"),
        (hl7(correlate_by={"PID.5.1.1.1": "x"}), "correlate_by"),
    ],
)
def test_bad_paths_are_rejected_at_parse_time(assertion: dict[str, Any], key: str) -> None:
    with pytest.raises(AssertionInvalid) as caught:
        parse_assertion(assertion)
    assert key in caught.value.errors


def test_bad_path_scores_unsupported_not_error(tmp_path: Path) -> None:
    state = open_snapshot(write_snapshot(tmp_path / "snap", hl7=[ADT_A04]))
    (run,) = verify_task([CriterionSpec(hl7(correlate_by={"PIDX.1": "x"}))], state).runs
    assert run.result.status == "ok" and run.result.score == 0
    assert run.result.details.startswith("unsupported assertion:")
    assert "PIDX.1" in run.result.details


def test_through_the_cli(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path / "snap", hl7=[Hl7Record(1, SIU_S12, event_id="evt_1"), ORM_O01])
    task = tmp_path / "task.yaml"
    task.write_text(
        "criteria:\n"
        "  - label: appointment booked\n"
        "    assertion:\n"
        "      assert: hl7-structural\n"
        "      correlate_by: {message_type: SIU^S12}\n"
        "      fields:\n"
        "        - {path: SCH-1, expected: '12345'}\n"
        "        - {path: 'PID-5.2', expected: ADAM}\n"
        "        - {path: SCH.11.4, operator: greaterThan, expected: '20200101'}\n"
    )
    result = CliRunner().invoke(app, ["verify", str(task), str(snapshot), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    (run,) = body["criterion_runs"]
    assert run["passed"] is True and run["score"] == 1
    assert run["details"] == "SIU^S12 message 1 matched; 3 of 3 field assertions passed."
    assert run["evidence"]["event_id"] == "evt_1"
    assert run["evidence"]["control_id"] == "MSG00012"
    assert body["score"] == 1
