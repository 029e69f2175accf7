"""Loop resolution against the 005010 guides (X279A1 270/271, X212 276/277, X217 278; and, as a
bonus, X221A1 835 and X222A1/X223A2 837).

Real files reach 2100C/2110C/2120C, 2200D/2220D, 2000E/2010EA/2010EB and 2000F/2010FA; the
loops no bundled file shows (2115C, 2010EC, 2010FB) are built with the writer's builder.
"""

from __future__ import annotations

from textwrap import dedent

import pytest
from tests.conftest import FIXTURES

from assay.formats.x12 import X12Path, build_transaction, guide_for, parse_x12, segments_in

X12 = FIXTURES / "x12"


def _outline(relative: str, index: int = 0) -> str:
    transaction = list(parse_x12((X12 / relative).read_bytes()).transactions())[index]
    return "\n".join(transaction.loops.outline(transaction.segments))


def _expect(text: str) -> str:
    return dedent(text).strip("\n")


def test_271_subscriber_reaches_2100c_2110c_2120c() -> None:
    assert _outline("linuxforhealth/271_005010X279A1/subscriber-health-benefit-check.271") == _expect("""
        (root) ST BHT SE
          2000A HL
            2100A NM1
            2000B HL
              2100B NM1
              2000C HL TRN
                2100C NM1 N3 N4 DMG DTP
                  2110C EB
                  2110C EB LS LE
                    2120C NM1
                  2110C EB
                  2110C EB
                  2110C EB
        """)


def test_271_dependent_loops() -> None:
    outline = _outline("linuxforhealth/271_005010X279A1/dependent-health-benefit-check.271")
    assert "2000D HL TRN\n          2100D NM1 N3 N4 DMG INS DTP\n            2110D EB" in outline
    assert "2110D EB LS LE\n              2120D NM1" in outline


def test_270_eligibility_inquiry_starts_2110c_at_eq() -> None:
    outline = _outline("linuxforhealth/270_005010X279A1/demo-single-line.270")
    assert outline.endswith("2000C HL TRN\n        2100C NM1 DMG DTP\n          2110C EQ")


def test_277_claim_status_reaches_2200d_and_2220d() -> None:
    outline = _outline("x12-types/277/parse_277_02.x12")
    assert "2000A HL\n    2100A NM1\n    2200A TRN DTP DTP" in outline
    assert "2100B NM1\n      2200B TRN STC QTY QTY AMT AMT" in outline
    assert "2100C NM1\n        2200C TRN REF QTY AMT" in outline
    assert "2200D TRN STC REF REF DTP\n            2220D SVC STC REF DTP" in outline


def test_277_dependent_claim_reaches_2200e_and_2220e() -> None:
    outline = _outline("linuxforhealth/277_005010X212/claim-level-status.277")
    assert outline.endswith(
        "2000E HL\n            2100E NM1\n            2200E TRN STC REF REF\n              2220E SVC STC DTP"
    )


def test_276_service_line_is_2210() -> None:
    outline = _outline("linuxforhealth/276_005010X212/claim-level-status.276")
    assert "2210E SVC" in outline and "2220" not in outline


def test_278_response_reaches_2000e_2010ea_2000f() -> None:
    assert _outline("herophilus/278DVSResponseSample.txt") == _expect("""
        (root) ST BHT SE
          2000A HL
            2010A NM1
            2000B HL
              2010B NM1 REF
              2000C HL
                2010C NM1 DMG
                2000E HL TRN UM HCR DTP
                  2010EA NM1
                  2010EA NM1
                  2000F HL TRN HCR SV1
        """)


def test_278_transport_loops_are_2010eb() -> None:
    outline = _outline("x12-types/278/parse_278_20.x12")
    assert outline.count("2010EB NM1 N3 N4") == 4
    assert outline.count("2000F HL SV1") == 3


def test_278_service_provider_is_2010fa() -> None:
    outline = _outline("x12-types/278/parse_278_6__278_Response_Examples.x12")
    assert "2000F HL UM DTP PWK\n            2010FA NM1 REF PER" in outline


def test_loops_without_a_fixture_2115c_2010ec_2010fb() -> None:
    eligibility = build_transaction(
        "271",
        [
            ("HL", "1", "", "20", "1"), ("NM1", "PR", "2", "PAYER"),
            ("HL", "2", "1", "21", "1"), ("NM1", "1P", "2", "CLINIC"),
            ("HL", "3", "2", "22", "0"), ("NM1", "IL", "1", "DOE", "JANE", "", "", "", "MI", "M1"),
            ("EB", "1", "", "30"), ("III", "ZZ", "21"), ("LS", "2120"), ("NM1", "P3", "1", "PCP"),
            ("N3", "1 MAIN"), ("NM1", "1P", "1", "OTHER"), ("LE", "2120"), ("EB", "B", "", "98"),
        ],
        guide="005010X279A1",
    )  # fmt: skip
    outline = "\n".join(eligibility.loops.outline(eligibility.segments))
    assert outline.endswith(
        "2100C NM1\n"
        "          2110C EB LS LE\n"
        "            2115C III\n"
        "            2120C NM1 N3\n"
        "            2120C NM1\n"
        "          2110C EB"
    )
    assert X12Path.parse("2115C/III02").read(eligibility) == "21"
    assert X12Path.parse("2120C/NM1[#2]03").read(eligibility) == "OTHER"
    assert X12Path.parse("2110C/EB[#2]01").read(eligibility) == "B"
    assert [s.id for s in segments_in(eligibility, ("2110C",))] == [
        "EB", "III", "LS", "NM1", "N3", "NM1", "LE", "EB",
    ]  # fmt: skip

    review = build_transaction(
        "278",
        [
            ("HL", "1", "", "20", "1"), ("NM1", "X3", "2", "UMO"),
            ("HL", "2", "1", "21", "1"), ("NM1", "1P", "2", "REQUESTER"),
            ("HL", "3", "2", "22", "1"), ("NM1", "IL", "1", "DOE"),
            ("HL", "4", "3", "EV", "1"), ("HCR", "A1", "CERT1"), ("NM1", "X3", "2", "OTHER UMO"),
            ("NM1", "FA", "2", "HOSPITAL"), ("HL", "5", "4", "SS", "0"), ("HCR", "A3", "", "35"),
            ("NM1", "SJ", "1", "SERVICE PROVIDER"), ("NM1", "X3", "2", "SERVICE UMO"),
        ],
        guide="005010X217",
    )  # fmt: skip
    assert X12Path.parse("2010EC/NM103").read(review) == "OTHER UMO"
    assert X12Path.parse("2010EA/NM103").read(review) == "HOSPITAL"
    assert X12Path.parse("2010FA/NM103").read(review) == "SERVICE PROVIDER"
    assert X12Path.parse("2010FB/NM103").read(review) == "SERVICE UMO"
    assert X12Path.parse("2000E/HCR01").read(review) == "A1"
    assert X12Path.parse("2000F/HCR03").read(review) == "35"
    assert X12Path.parse("2000E/2000F/HCR01").read(review) == "A3"


def test_a_loop_prefix_includes_descendant_loops() -> None:
    transaction = next(parse_x12((X12 / "x12-types/277/parse_277_02.x12").read_bytes()).transactions())
    assert X12Path.parse("2000D/STC01-1").read(transaction) == "DR02"
    # The service-line STC lives in 2220D, a descendant of 2200D and of 2000D.
    assert X12Path.parse("2220D/STC01").read(transaction) is not None
    assert X12Path.parse("2200D/SVC01-2").read(transaction) == X12Path.parse("2220D/SVC01-2").read(
        transaction
    )


def test_hl_loops_nest_by_hl02_even_when_not_adjacent() -> None:
    transaction = next(parse_x12((X12 / "x12-types/278/parse_278_18.x12").read_bytes()).transactions())
    service = transaction.loops.find("2000F")
    assert len(service) == 3
    assert service[1] in service[0].children and service[2] in service[1].children


@pytest.mark.parametrize(("code", "guide"), [("834", ""), ("999", ""), ("820", ""), ("837", "005010X224A2")])
def test_other_transactions_are_read_segment_by_segment(code: str, guide: str) -> None:
    assert guide_for(code, guide) is None
    transaction = build_transaction(code, [("BHT", "0019"), ("HL", "1", "", "20", "1")], guide=guide)
    assert transaction.loops.children == []
    assert transaction.loops.positions == list(range(len(transaction.segments)))


def test_835_loops_without_hl() -> None:
    assert _outline("linuxforhealth/835_005010X221A1/managed-care.835") == _expect("""
        (root) ST BPR TRN DTM SE
          1000A N1 N3 N4
          1000B N1 REF
          2000 LX
            2100 CLP CAS NM1
              2110 SVC DTM DTM CAS
            2100 CLP CAS NM1
              2110 SVC DTM DTM CAS CAS
        """)


def test_835_provider_adjustment_returns_to_the_transaction_level() -> None:
    assert _outline("linuxforhealth/835_005010X221A1/medicare-part-a.835") == _expect("""
        (root) ST BPR TRN DTM PLB SE
          1000A N1 N3 N4 REF
          1000B N1
          2000 LX TS3 TS2
            2100 CLP CAS NM1 MIA DTM DTM QTY
          2000 LX TS3
            2100 CLP CAS NM1 MOA DTM
        """)


def test_837_professional_and_institutional() -> None:
    professional = _outline("imsweb/837_5010/x12_valid.txt")
    assert professional.startswith(
        "(root) ST BHT SE\n  1000A NM1 PER\n  1000B NM1\n  2000A HL\n    2010AA NM1"
    )
    assert "2300 CLM HI\n        2400 LX SV1 DTP" in professional
    institutional = _outline("linuxforhealth/837_005010X223A3/institutional-claim.837i")
    assert "2300 CLM DTP CL1 HI HI HI HI HI\n        2310A NM1 REF\n        2320 SBR OI\n" in institutional
    assert "          2330A NM1 N3 N4\n          2330B NM1\n        2400 LX SV2 DTP" in institutional
