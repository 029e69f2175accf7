"""`Hl7Path`: the SPEC §3.3 grammar, its spellings and its errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.formats.hl7 import Hl7Path, Hl7PathError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PID.5.1", Hl7Path("PID", 5, component=1)),
        ("PID.3[2].1", Hl7Path("PID", 3, repetition=2, component=1)),
        ("OBX[2].5", Hl7Path("OBX", 5, occurrence=2)),
        ("MSH.9.2", Hl7Path("MSH", 9, component=2)),
        ("PID.5.1.2", Hl7Path("PID", 5, component=1, subcomponent=2)),
        ("PID-5-1", Hl7Path("PID", 5, component=1)),
        ("PID-5.1", Hl7Path("PID", 5, component=1)),
        ("MSH-10", Hl7Path("MSH", 10)),
        ("ZPD.4", Hl7Path("ZPD", 4)),
        ("pid.5", Hl7Path("PID", 5)),
        ("  PID.5  ", Hl7Path("PID", 5)),
        ("PID[1].5[1]", Hl7Path("PID", 5)),
    ],
)
def test_parses_every_spelling(text: str, expected: Hl7Path) -> None:
    assert Hl7Path.parse(text) == expected


def test_canonical_text_uses_dots_and_omits_first_positions() -> None:
    assert str(Hl7Path.parse("OBX-3-1")) == "OBX.3.1"
    assert str(Hl7Path.parse("OBX[2].3[1].1.1")) == "OBX[2].3.1.1"
    assert str(Hl7Path.parse("PID.3[2]")) == "PID.3[2]"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("PID", "field number is required"),
        ("PIDX.5", "not a segment ID"),
        ("PI.5", "not a segment ID"),
        ("1ID.5", "not a segment ID"),
        ("PID.0", "1-based"),
        ("OBX[0].5", "1-based"),
        ("PID..5", "empty position"),
        ("PID.5.", "empty position"),
        ("PID.5.1.2.3", "too many parts"),
        ("PID.x", "not a field number"),
        ("PID.5.a", "not a component number"),
        ("PID.5.1.b", "not a subcomponent number"),
        ("PID[x].5", "segment occurrence"),
        ("PID 5", "unexpected"),
        ("PID.5[2", "not a field number"),
    ],
)
def test_bad_paths_say_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(Hl7PathError) as caught:
        Hl7Path.parse(text)
    assert reason in str(caught.value)
    assert repr(text) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_paths_are_frozen_values() -> None:
    path = Hl7Path.parse("PID.5.1")
    with pytest.raises(AttributeError):
        path.field = 6  # type: ignore[misc]
    assert {path, Hl7Path.parse("PID-5-1")} == {path}


def test_direct_construction_is_validated() -> None:
    with pytest.raises(Hl7PathError):
        Hl7Path("PID", 5, subcomponent=1)
    with pytest.raises(Hl7PathError):
        Hl7Path("pid", 5)


positions = st.integers(min_value=1, max_value=999)
segments = st.from_regex(r"[A-Z][A-Z0-9]{2}", fullmatch=True)


@st.composite
def hl7_paths(draw: st.DrawFn) -> Hl7Path:
    component = draw(st.none() | positions)
    subcomponent = draw(st.none() | positions) if component is not None else None
    return Hl7Path(
        segment=draw(segments),
        field=draw(positions),
        occurrence=draw(positions),
        repetition=draw(positions),
        component=component,
        subcomponent=subcomponent,
    )


@given(hl7_paths())
def test_format_then_parse_round_trips(path: Hl7Path) -> None:
    assert Hl7Path.parse(str(path)) == path


@given(hl7_paths(), st.lists(st.sampled_from(".-"), min_size=3, max_size=3))
def test_dash_and_dot_spellings_are_equal(path: Hl7Path, seps: list[str]) -> None:
    text = path.segment + (f"[{path.occurrence}]" if path.occurrence != 1 else "")
    text += f"{seps[0]}{path.field}[{path.repetition}]"
    if path.component is not None:
        text += f"{seps[1]}{path.component}"
    if path.subcomponent is not None:
        text += f"{seps[2]}{path.subcomponent}"
    assert Hl7Path.parse(text) == Hl7Path.parse(text.replace("-", ".")) == path
