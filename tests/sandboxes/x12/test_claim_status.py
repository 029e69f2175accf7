"""276 → 277 (X212): STC category:status with amounts, dates and check number; STC*A4 when unknown."""

from __future__ import annotations

from assay.sandboxes.payer import parse_payer
from assay.sandboxes.x12 import respond
from tests.conftest import FIXTURES

from ..payer.samples import PAYER
from .reading import every, read, transactions
from .requests import NOW, claim_status_276, interchange

DEFINITION = parse_payer(PAYER)


def test_each_claim_gets_its_status() -> None:
    request = claim_status_276(
        ("W123456789", "PCN001", "250"), ("w123456789", "pcn002", "90"), ("W123456789", "NOPE", "12.5"),
        ("X987", "PCN001", "250"),
    )  # fmt: skip
    reply = respond("276", interchange("276", request), DEFINITION, control_number=5, now=NOW)
    assert reply.kind == "277" and reply.problems == ()
    [status] = transactions(reply.text)
    assert status.guide == "005010X212" and read(status, "BHT01") == "0010" and read(status, "BHT02") == "08"
    assert every(status, "2200D/TRN02") == ["PCN001", "pcn002", "NOPE", "PCN001"]
    assert every(status, "2200D/STC01") == ["F1:65", "P1:20", "A4:35", "A4:35"]
    paid = "STC*F1:65*20260320**250*180.5*20260320*CHK*20260320*CHK5550"
    assert str(status.segments[[s.id for s in status.segments].index("STC")]) == paid
    assert read(status, "STC01-1") == "F1" and read(status, "STC09") == "CHK5550"
    assert every(status, "2200D/STC04") == ["250", "90", "12.5", "250"]  # the request's charge when unknown
    assert every(status, "2200D/STC05") == ["180.5", "0", "0", "0"]
    assert read(status, "2200D/DTP[472]03") == "20260302" and every(status, "2200D/REF[EJ]02")[0] == "PCN001"
    assert read(status, "2100D/NM1[IL]09") == "W123456789"


def test_the_x212_sample_is_answered_loop_for_loop() -> None:
    """LinuxForHealth's 276 (subscriber claims and a dependent's) against our payer: all unknown."""
    sample = (FIXTURES / "x12/linuxforhealth/276_005010X212/claim-level-status.276").read_bytes()
    reply = respond("276", sample, DEFINITION, control_number=6, now=NOW)
    [status] = transactions(reply.text)
    assert every(status, "STC01") == ["A4:35"] * 3
    assert every(status, "2200D/TRN02") == ["ABCXYZ1", "ABCXYZ2"] and every(status, "2200E/TRN02") == [
        "ABCXYZ3"
    ]
    assert read(status, "2100E/NM1[QC]04") == "JOSEPH"
