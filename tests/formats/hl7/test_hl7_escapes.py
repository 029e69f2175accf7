"""Escape sequences (HL7 v2.5.1 §2.7, SPEC §3.3): decoding, formatting kept verbatim, round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.formats.hl7 import DEFAULT_DELIMITERS, Delimiters, escape, unescape


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("A\\T\\E", "A&E"),
        ("Body weight\\S\\at birth", "Body weight^at birth"),
        ("LAB \\R\\2823 FRESNO", "LAB ~2823 FRESNO"),
        ("pipe\\F\\here", "pipe|here"),
        ("back\\E\\slash", "back\\slash"),
        ("line\\X0D\\\\X0A\\next", "line\r\nnext"),
        ("\\XC3A9\\", "é"),
        ("\\XE9\\", "é"),
        ("keep \\H\\bold\\N\\ and \\.br\\", "keep \\H\\bold\\N\\ and \\.br\\"),
        ("\\.sp2\\\\Cxxyy\\\\Zlocal\\", "\\.sp2\\\\Cxxyy\\\\Zlocal\\"),
        ("bad hex \\XZZ\\ odd \\X123\\ empty \\X\\", "bad hex \\XZZ\\ odd \\X123\\ empty \\X\\"),
        ("unterminated \\F", "unterminated \\F"),
        ("no escapes at all", "no escapes at all"),
    ],
)
def test_decodes_delimiters_and_hex_keeps_formatting(raw: str, decoded: str) -> None:
    assert unescape(raw) == decoded


def test_custom_escape_character() -> None:
    delimiters = Delimiters(field="!", component="@", repetition="*", escape="#", subcomponent="%")
    assert unescape("a#S#b#T#c#F#d#E#e#R#f", delimiters) == "a@b%c!d#e*f"
    assert unescape("\\S\\ stays", delimiters) == "\\S\\ stays"
    assert unescape("#H#kept#N#", delimiters) == "#H#kept#N#"


def test_escape_encodes_every_delimiter_and_line_ends() -> None:
    assert escape("A&E|x^y~z\\w\r\n") == "A\\T\\E\\F\\x\\S\\y\\R\\z\\E\\w\\X0D\\\\X0A\\"


_PUNCTUATION = "|^~\\&!@#$%*+=?/:;<>,"


@st.composite
def delimiter_sets(draw: st.DrawFn) -> Delimiters:
    chars = draw(st.permutations(_PUNCTUATION))[:5]
    return Delimiters(*chars)


@given(st.text(), delimiter_sets())
def test_escape_then_unescape_round_trips(text: str, delimiters: Delimiters) -> None:
    encoded = escape(text, delimiters)
    for delimiter in (delimiters.field, delimiters.component, delimiters.repetition, delimiters.subcomponent):
        assert delimiter not in encoded
    assert "\r" not in encoded and "\n" not in encoded
    assert unescape(encoded, delimiters) == text


@given(st.text(alphabet=st.sampled_from("\\FSTREXH.br0D9a ")))
def test_unescape_never_fails_on_any_text(text: str) -> None:
    assert isinstance(unescape(text, DEFAULT_DELIMITERS), str)
