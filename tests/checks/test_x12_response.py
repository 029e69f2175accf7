"""`x12-response` end to end: snapshots of real 271/277/278 responses scored by `verify_task` (SPEC §3.7)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import FIXTURES
from typer.testing import CliRunner

from assay.checks import CHECKS
from assay.checks import x12_response as check_module
from assay.checks._parsed import CACHED_UP_TO
from assay.clients.cli import app
from assay.core.assertions import parse_assertion
from assay.core.assertions.x12 import CORRELATION_ALIASES
from assay.core.errors import AssertionInvalid
from assay.core.results import CriterionResult
from assay.core.state import X12Record
from assay.formats.x12 import build_interchange, build_transaction, write_x12
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

X12 = FIXTURES / "x12"
REQUEST_270 = (X12 / "linuxforhealth/270_005010X279A1/subscriber-health-benefit-check.270").read_text()
RESPONSE_271 = (X12 / "linuxforhealth/271_005010X279A1/subscriber-health-benefit-check.271").read_text()
DEPENDENT_271 = (X12 / "linuxforhealth/271_005010X279A1/dependent-health-benefit-check.271").read_text()
IMSWEB_271 = (X12 / "imsweb/x270_271/x271.txt").read_text()  # IEA02 and SE01 disagree with the envelope
CLAIMS_277 = (X12 / "imsweb/277_5010/x12_277_x212.txt").read_text()  # many claims; IEA02 mismatch
DEPENDENT_277 = (X12 / "linuxforhealth/277_005010X212/claim-level-status.277").read_text()
ACK_277CA = (X12 / "x12-types/277/parse_277_02.x12").read_text()
REVIEW_278 = (X12 / "herophilus/278DVSResponseSample.txt").read_text()
REJECTED_278 = (
    X12 / "x12-types/278/parse_278_7__Example_of_278_Response_Rejected_Transaction.x12"
).read_text()
TRANSPORT_278 = (X12 / "x12-types/278/parse_278_20.x12").read_text()
ACK_999 = (X12 / "herophilus/999_Sample_Accepted_.txt").read_text()


def x12(*fields: tuple[str, Any], **keys: Any) -> dict[str, Any]:
    assertion: dict[str, Any] = {"assert": "x12-response", **keys}
    if fields:
        assertion["fields"] = [{"path": path, "expected": expected} for path, expected in fields]
    return assertion


def records(*responses: str | X12Record) -> list[X12Record]:
    return [
        r if isinstance(r, X12Record) else X12Record(seq, r, record_id=f"x12_{seq}")
        for seq, r in enumerate(responses, 1)
    ]


def score(
    tmp_path: Path, exchanges: Sequence[X12Record], *assertions: dict[str, Any]
) -> list[CriterionResult]:
    state = open_snapshot(write_snapshot(tmp_path / "snap", x12=exchanges))
    verification = verify_task([CriterionSpec(a, label=f"c{i}") for i, a in enumerate(assertions)], state)
    results = [run.result for run in verification.runs]
    assert all(r.status == "ok" for r in results), [r.details for r in results]
    return results


def actuals(result: CriterionResult) -> list[Any]:
    return [entry["actual"] for entry in result.evidence["fieldResults"]]


def test_registered_under_its_tag() -> None:
    assert CHECKS["x12-response"] is check_module.check
    assert set(CORRELATION_ALIASES) == {"member_id", "trace_number", "patient_control_number"}


def test_known_values_of_a_real_271(tmp_path: Path) -> None:
    exchange = X12Record(1, RESPONSE_271, request=REQUEST_270, record_id="x12_1")
    (result,) = score(
        tmp_path,
        [exchange],
        x12(
            ("BHT03", "10001234"),
            ("2100C/NM1[IL]09", "123456789"),
            ("2100C/NM103", "SMITH"),
            ("2110C/EB[1]03", "30"),
            ("2110C/EB[1]05", "GOLD 123 PLAN"),
            ("EB[#2]01", "L"),
            ("2110C/EB[1][#2]03~2", "33"),
            ("EB[B]07", 10),
            ("EB[B][#2]07", "30.00"),
            ("2120C/NM1[P3]03", "JONES"),
            ("2100C/DMG02", "19630519"),
            transaction="271",
            correlate_by={"member_id": "123456789", "trace_number": "93175-012547"},
        ),
    )
    assert result.score == 1, result.evidence
    assert result.details == "271 4321 in X12 response 1 matched; 11 of 11 field assertions passed."
    assert result.evidence == {
        "fieldResults": result.evidence["fieldResults"],
        "record_id": "x12_1",
        "transaction": "271",
    }
    assert result.evidence["fieldResults"][7] == {
        "path": "EB[B]07",
        "expected": 10,
        "actual": "10.00",
        "passed": True,
    }


def test_dependent_271_and_a_failing_field(tmp_path: Path) -> None:
    (result,) = score(
        tmp_path,
        records(DEPENDENT_271),
        x12(
            ("2100D/NM1[03]03", "SMITH"),
            ("2110D/EB[1]03", "30"),
            ("2120D/NM103", "JONES"),
            ("2100C/NM1[IL]09", "WRONG"),
            transaction="270",
        ),
    )
    assert actuals(result)[:3] == ["SMITH", "30", "JONES"]
    assert result.score == pytest.approx(3 / 4)
    assert result.details.endswith("3 of 4 field assertions passed.")


def test_271_from_a_4010_envelope_reports_envelope_warnings(tmp_path: Path) -> None:
    (result,) = score(
        tmp_path, records(IMSWEB_271), x12(("2110C/EB[1]05", "GOLD 123 PLAN"), transaction="271")
    )
    assert result.score == 1
    warnings = result.evidence["warnings"]
    assert "SE01 says 22 segments, found 18" in warnings
    assert any(w.startswith("IEA02") for w in warnings)


def test_claim_status_277_by_patient_control_number(tmp_path: Path) -> None:
    (result,) = score(
        tmp_path,
        records(CLAIMS_277),
        x12(
            ("2200D/STC01-1", "A1"),
            ("2200D/STC01", "A1:704"),
            ("2200D/STC04", 600),
            ("2100D/NM104", "JANEONE"),
            ("STC12", "PAYER ACKNOWLEDGED RECEIPT OF THE CLAIM"),
            transaction="277",
            correlate_by={"patient_control_number": "0000003", "member_id": "0000000001"},
        ),
    )
    assert result.score == 1, result.evidence
    assert any("IEA02" in w for w in result.evidence["warnings"])


def test_dependent_claim_service_line_2220e(tmp_path: Path) -> None:
    (result,) = score(
        tmp_path,
        records(DEPENDENT_277),
        x12(
            ("2000E/2100E/NM104", "JOSEPH"),
            ("2220E/SVC01-2", "99203"),
            ("2220E/STC01", "F2:88:QC"),
            ("2200D/TRN02", "ABCXYZ1"),
            ("2200D/TRN[#2]02", "ABCXYZ2"),
            transaction="276",
            correlate_by={"trace_number": "ABCXYC3"},
        ),
    )
    assert result.score == 1, result.evidence


def test_277ca_claim_level_and_service_line_2220d(tmp_path: Path) -> None:
    (result,) = score(
        tmp_path,
        records(ACK_277CA),
        x12(
            ("2220D/SVC01", "HC:G9938"),
            ("2220D/SVC02", 50.5),
            ("2200B/STC01-1", "DR02"),
            ("2200B/QTY[AA]02", 2),
            ("2000D/STC01-2", "20"),
            transaction="277",
        ),
    )
    assert result.score == 1, result.evidence


def test_known_values_of_real_278_responses(tmp_path: Path) -> None:
    certified, rejected, transport = score(
        tmp_path,
        records(REVIEW_278, REJECTED_278, TRANSPORT_278),
        x12(
            ("2000E/HCR01", "A1"),
            ("2000E/HCR02", "99999999999"),
            ("2000E/UM01", "HS"),
            ("2010EA/NM1[DK]09", "1234567891"),
            ("2000F/SV101-2", "A4927"),
            ("2010C/NM103", "Patient Last Name"),
            transaction="278",
            correlate_by={"member_id": "XX99999X", "trace_number": "012090880001ERM203232010"},
        ),
        x12(
            ("2000E/AAA03", "33"),
            ("2000E/MSG01", "Bx27808063,Bx27808065,Bx27808067"),
            ("2010EA/NM1[DK]03", "SMITH"),
            correlate_by={"2010C/NM1[IL]09": "511111111"},
        ),
        x12(
            ("2010EB/NM1[#2]03", "DR. GARDNER OFFICE"),
            ("2010EB/NM1[R3]03", "XYZ DIALYSIS CENTER"),
            ("2000F/SV1[#3]01-3", "DR"),
            ("2000F/SV1[#4]01", None),
            correlate_by={"member_id": "12345689001", "BHT03": "165932"},
        ),
    )
    assert certified.score == 1, certified.evidence
    assert certified.evidence["record_id"] == "x12_1"
    assert rejected.score == 1 and rejected.evidence["record_id"] == "x12_2"
    assert actuals(transport) == ["DR. GARDNER OFFICE", "XYZ DIALYSIS CENTER", "DR", None]
    assert transport.score == 1


def test_correlation_falls_back_to_the_request(tmp_path: Path) -> None:
    request = write_x12(
        build_interchange(
            [build_transaction("270", [("HL", "1", "", "20", "1"), ("HL", "2", "1", "21", "1"),
                                       ("HL", "3", "2", "22", "0"), ("TRN", "1", "REQ-TRACE", "9ORIGIN"),
                                       ("NM1", "IL", "1", "DOE", "", "", "", "", "MI", "M-9"), ("EQ", "30")])],
            sender_id="AGENT", receiver_id="CH",
        )
    )  # fmt: skip
    rejection = write_x12(
        build_interchange(
            [build_transaction("271", [("HL", "1", "", "20", "1"), ("HL", "2", "1", "21", "1"),
                                       ("HL", "3", "2", "22", "0"), ("NM1", "IL", "1", "DOE"),
                                       ("AAA", "N", "", "75", "C")])],
            sender_id="CH", receiver_id="AGENT",
        )
    )  # fmt: skip
    exchange = X12Record(1, rejection, request=request, record_id="x12_1")
    found, missed = score(
        tmp_path,
        [exchange],
        x12(("2100C/AAA03", "75"), correlate_by={"member_id": "M-9", "trace_number": "REQ-TRACE"}),
        x12(("2100C/AAA03", "75"), correlate_by={"member_id": "M-10"}),
    )
    assert found.score == 1
    assert missed.score == 0
    assert missed.details.startswith("No X12 response matched member_id=M-10. Transaction sets: 271 0001")


def test_match_modes_over_arrival_order(tmp_path: Path) -> None:
    exchanges = records(RESPONSE_271, IMSWEB_271, REVIEW_278)
    field = ("2120C/NM1[P3]04", "MARCUS")
    plan = ("2110C/EB[1]05", "GOLD 123 PLAN")
    bht = ("BHT03", "10001234")
    results = score(
        tmp_path,
        exchanges,
        x12(bht, field, transaction="271", match="first"),
        x12(bht, ("2100B/NM103", "BONE AND JOINT CLINIC"), transaction="271", match="latest"),
        x12(plan, ("2100B/NM103", "BONE AND JOIN CLINIC"), transaction="271", match="all"),
        x12(plan, ("2100B/NM103", "BONE AND JOIN CLINIC"), transaction="271", match="any"),
        x12(("BHT03", "2010122100001")),
    )
    first, latest, worst, best, anything = results
    assert first.score == 1 and first.evidence["record_id"] == "x12_1"
    assert latest.score == 1 and latest.evidence["record_id"] == "x12_2"
    assert worst.score == pytest.approx(1 / 2) and worst.evidence["record_id"] == "x12_2"
    assert best.score == 1 and best.evidence["record_id"] == "x12_1"
    assert anything.score == 1 and anything.evidence["transaction"] == "278"


def test_acknowledgements_are_not_candidates(tmp_path: Path) -> None:
    (result,) = score(tmp_path, records(ACK_999), x12(("AK901", "A")))
    assert result.score == 0
    assert result.details == (
        "No X12 response matched any transaction set."
        " No recorded response holds a transaction set other than 999/997 acknowledgements."
    )
    assert result.evidence == {
        "fieldResults": [{"path": "AK901", "expected": "A", "actual": None, "passed": False}],
        "record_id": None,
        "transaction": None,
    }


def test_transaction_filter_keeps_one_exchange_family(tmp_path: Path) -> None:
    claim, review = score(
        tmp_path, records(RESPONSE_271, REVIEW_278), x12(transaction="277"), x12(transaction="278")
    )
    assert claim.score == 0
    assert claim.details == (
        "No X12 response matched transaction=277. No recorded response holds a 276/277 transaction set."
    )
    assert review.score == 1 and review.details.endswith("0 of 0 field assertions passed.")


def test_unparseable_records_are_not_candidates(tmp_path: Path) -> None:
    broken, mixed = score(
        tmp_path,
        records("not x12 at all", "GS*HB*A*B~"),
        x12(("BHT03", "1")),
    ) + score(tmp_path / "second", records("garbage", RESPONSE_271), x12(("BHT03", "10001234")))
    assert broken.score == 0
    assert (
        "None of the stored responses parses: response 1: input does not start with an ISA" in broken.details
    )
    assert "response 2:" in broken.details
    assert mixed.score == 1


def test_no_records_at_all(tmp_path: Path) -> None:
    (result,) = score(tmp_path, [], x12(("BHT03", "1"), transaction="271"))
    assert result.details == "No X12 response matched transaction=271. No X12 exchange was recorded."


@pytest.mark.parametrize(
    ("assertion", "key", "message"),
    [
        (x12(("EB[1", "1")), "fields.0.path", "invalid X12 path 'EB[1'"),
        (x12(("eb01", "1")), "fields.0.path", "invalid X12 path 'eb01'"),
        (
            x12(correlate_by={"memberid": "1"}),
            "correlate_by",
            "correlate_by key 'memberid' is neither an alias",
        ),
        (x12(transaction="835"), "transaction", "271"),
    ],
)
def test_bad_paths_are_rejected_at_parse_time(assertion: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(AssertionInvalid) as info:
        parse_assertion(assertion)
    assert key in info.value.errors
    assert any(message in m for m in info.value.errors[key])


def test_valid_spellings_parse() -> None:
    parsed = parse_assertion(
        x12(("EB*01", "1"), ("EB-03~2", "33"), ("STC01-1", "A1"), transaction=271,
            correlate_by={"trace_number": "T", "2100C/NM1[IL]09": "M"})
    )  # fmt: skip
    assert parsed.transaction == "271"


def test_through_the_cli(tmp_path: Path) -> None:
    snapshot = write_snapshot(
        tmp_path / "snap", x12=[X12Record(1, REVIEW_278, record_id="x12_review"), X12Record(2, ACK_999)]
    )
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps(
            {
                "criteria": [
                    {
                        "label": "certified",
                        "assertion": x12(
                            ("2000E/HCR01", "A1"),
                            ("2000F/HCR01", "A1"),
                            transaction="278",
                            correlate_by={"member_id": "XX99999X"},
                        ),
                    },
                    {"label": "denied", "assertion": x12(("2000E/HCR01", "A3"), transaction="278")},
                ]
            }
        )
    )
    result = CliRunner().invoke(app, ["verify", str(task), str(snapshot), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    certified, denied = body["criterion_runs"]
    assert certified["passed"] is True
    assert certified["evidence"]["record_id"] == "x12_review"
    assert certified["evidence"]["transaction"] == "278"
    assert denied["evidence"]["fieldResults"] == [
        {"path": "2000E/HCR01", "expected": "A3", "actual": "A1", "passed": False}
    ]
    assert body["score"] == 0.5 and body["verdict"] == "partial"


def test_large_response_is_read_without_the_cache(tmp_path: Path) -> None:
    large = (X12 / "imsweb/837_5010/x12_many_claims.txt").read_text()
    assert len(large) > CACHED_UP_TO
    (result,) = score(tmp_path, records(large), x12(("BHT03", "0123"), ("2000B/2300/CLM[#2]01", "A37YH667")))
    assert result.score == 1, result.evidence
    assert result.evidence["transaction"] == "837"
