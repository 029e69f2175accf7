"""Every bundled HL7v2 fixture either parses or fails with a clear `Hl7ParseError`.

A differential check rides along (style.md, after h11's tests against the standard library): for
each message, every leaf position read through python-hl7 and our grammar equals a naive
split of the raw segment text by the message's own delimiters.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import FIXTURES

from assay.formats.hl7 import Hl7Message, Hl7ParseError, parse_messages, unescape

HL7_FILES = sorted(p for p in (FIXTURES / "hl7v2").rglob("*") if p.is_file())

MALFORMED = {
    "cdc-trusted-intermediary/TX__001_TX_OML_O21.hl7": "'panel AHIC^LN' is not a segment ID",
    "cdc-trusted-intermediary/Test__Message__empty.hl7": "empty input",
    "cdc-trusted-intermediary/Test__Message__msh_present_but_missing_all_fields.hl7": "no encoding characters",
    "cdc-trusted-intermediary/Test__Message__msh_present_but_missing_msh-2.hl7": "no encoding characters",
    "herophilus/Patient1_Vaccinations_RSP_1.dat": "'999' is not a segment ID",
    "python-hl7/sample_bad_batch.hl7": "EVN segment before any message header",
    "python-hl7/sample_bad_batch1.hl7": "inside an open batch",
    "python-hl7/sample_bad_file.hl7": "EVN segment before any message header",
    "python-hl7/sample_bad_file1.hl7": "inside an open batch",
    "python-hl7/sample_bad_file2.hl7": "(FHS) may only be the first segment",
    "python-hl7/sample_bad_file3.hl7": "EVN segment before any message header",
    "rethinkhealth/invalid-missing-msh.hl7": "PID segment before any message header",
    "rethinkhealth/invalid-segment-header-length.hl7": "'PIDX' is not a segment ID",
}


def _name(path: Path) -> str:
    return path.relative_to(FIXTURES / "hl7v2").as_posix()


def test_the_fixture_set_is_the_one_described() -> None:
    assert len(HL7_FILES) >= 250
    names = {_name(path) for path in HL7_FILES}
    assert set(MALFORMED) <= names


@pytest.mark.parametrize("path", HL7_FILES, ids=_name)
def test_fixture_parses_or_fails_clearly(path: Path) -> None:
    expected_error = MALFORMED.get(_name(path))
    if expected_error is not None:
        with pytest.raises(Hl7ParseError) as caught:
            parse_messages(path.read_bytes())
        assert expected_error in str(caught.value)
        return
    messages = parse_messages(path.read_bytes())
    assert messages
    for message in messages:
        assert message.segment_ids[0] == "MSH"
        assert message.read("MSH.1").value == message.delimiters.field
        _agrees_with_naive_split(message)


def _agrees_with_naive_split(message: Hl7Message) -> None:
    d = message.delimiters
    seen: dict[str, int] = {}
    for line in message.text.split("\r"):
        segment_id = line[:3]
        seen[segment_id] = occurrence = seen.get(segment_id, 0) + 1
        fields = line.split(d.field)
        if segment_id == "MSH":
            fields = ["MSH", d.field, *fields[1:]]
        for f, field in enumerate(fields[1:], 1):
            if segment_id == "MSH" and f <= 2:
                continue
            for r, repetition in enumerate(field.split(d.repetition), 1):
                for c, component in enumerate(repetition.split(d.component), 1):
                    for s, sub in enumerate(component.split(d.subcomponent), 1):
                        got = message.read(f"{segment_id}[{occurrence}].{f}[{r}].{c}.{s}")
                        if sub == "":
                            assert not got.found
                        elif sub == '""':
                            assert got.found and got.value is None
                        else:
                            assert got.value == unescape(sub, d)
