"""Operators and comparison rules of SPEC §3.1, one rule per test.

Values are read the way checks read them (`read_dotted` over JSON), so the multi-valued and
absent cases are the real shapes, not hand-built `Reading`s.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from assay.core.operators import OPERATORS, InvalidPattern, compile_pattern, evaluate, values_equal
from assay.core.values import ABSENT, Reading, is_empty, read_dotted, read_key

DOC: dict[str, Any] = {
    "copay": "25.00",
    "amount": 25,
    "active": True,
    "flag": "TRUE",
    "start": "2024-03-15T10:00:00+02:00",
    "name": "  Rivera  ",
    "blank": "",
    "nothing": None,
    "empty_list": [],
    "empty_object": {},
    "codes": ["A1", "B2"],
    "participant": [{"actor": {"display": "Dr. Rivera"}}, {"actor": {"display": "Pat Smith"}}],
    "hl7_date": "20240315",
    "month": "2024-03",
    "nan": float("nan"),
}


def holds(operator: str, path: str, expected: Any = None) -> bool:
    outcome = evaluate(operator, expected, read_dotted(DOC, path))
    assert outcome.error is None
    return outcome.passed


def test_every_operator_is_known_and_an_unknown_one_fails_with_a_reason() -> None:
    assert set(OPERATORS) == {
        "equals",
        "notEquals",
        "in",
        "notIn",
        "greaterThan",
        "lessThan",
        "greaterOrEqual",
        "lessOrEqual",
        "empty",
        "notEmpty",
        "contains",
        "notContains",
        "matches",
        "exists",
    }
    outcome = evaluate("approximately", 1, read_dotted(DOC, "amount"))
    assert not outcome.passed and outcome.error == "unknown operator 'approximately'"


# -- equals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("copay", 25),  # numeric string vs number
        ("copay", 25.0),
        ("amount", "25.00"),
        ("amount", "  25 "),
        ("active", "true"),  # booleans vs true/false strings, case-insensitive
        ("active", "True"),
        ("flag", True),
        ("start", "2024-03-15T08:00:00Z"),  # the same instant
        ("start", "2024-03-15T08:00:00.000+00:00"),
        ("name", "Rivera"),  # trimmed
        ("name", " Rivera"),
        ("participant.0.actor.display", "Dr. Rivera"),
        ("participant.actor.display", "Pat Smith"),  # any of several values
    ],
)
def test_equals_holds(path: str, expected: Any) -> None:
    assert holds("equals", path, expected)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("copay", "25"),  # two strings compare exactly, not numerically
        ("copay", 26),
        ("amount", "twenty five"),
        ("active", "yes"),
        ("active", 1),
        ("start", "2024-03-15T10:00:00Z"),
        ("start", "2024-03-15"),  # a date is not the instant
        ("name", "rivera"),  # case-sensitive
        ("participant.actor.display", "Dr. Smith"),
        ("missing", "x"),
    ],
)
def test_equals_fails(path: str, expected: Any) -> None:
    assert not holds("equals", path, expected)


def test_zero_is_not_false_and_one_is_not_true() -> None:
    assert not values_equal(0, False)
    assert not values_equal(True, 1)
    assert values_equal(False, " FALSE ")


@pytest.mark.parametrize("path", ["blank", "nothing", "empty_list", "empty_object", "missing"])
def test_null_expected_matches_empty_and_absent(path: str) -> None:
    assert holds("equals", path, None)
    assert not holds("notEquals", path, None)


def test_null_expected_does_not_match_a_value() -> None:
    assert not holds("equals", "name", None)
    assert holds("notEquals", "name", None)


def test_deep_equality_for_objects_and_arrays() -> None:
    assert values_equal({"a": [1, "2"], "b": {"c": "true"}}, {"a": ["1.0", 2], "b": {"c": True}})
    assert not values_equal({"a": 1}, {"a": 1, "b": None})
    assert not values_equal([1, 2], [2, 1])
    assert not values_equal("x", {"x": 1})
    assert evaluate("equals", ["A1", "B2"], read_dotted(DOC, "codes")).passed


# -- negative operators ---------------------------------------------------------------------------


def test_negative_operators_hold_on_an_absent_value() -> None:
    assert holds("notEquals", "missing", "x")
    assert holds("notIn", "missing", ["x"])
    assert holds("notContains", "missing", "x")


def test_multi_valued_actual_any_for_positive_every_for_negative() -> None:
    displays = "participant.actor.display"
    assert holds("equals", displays, "Dr. Rivera")
    assert not holds("notEquals", displays, "Dr. Rivera")  # one value equals
    assert holds("notEquals", displays, "Nobody")
    assert holds("in", displays, ["Nobody", "Pat Smith"])
    assert not holds("notIn", displays, ["Nobody", "Pat Smith"])
    assert holds("contains", displays, "Smith")
    assert not holds("notContains", displays, "Smith")
    assert holds("matches", displays, "^Dr\\.")


def test_multi_valued_evidence_actual_is_the_list_and_a_single_value_is_unwrapped() -> None:
    assert read_dotted(DOC, "participant.actor.display").actual == ["Dr. Rivera", "Pat Smith"]
    assert read_dotted(DOC, "participant.1.actor.display").actual == "Pat Smith"
    assert read_dotted(DOC, "missing.deeper") == ABSENT


# -- in / notIn -----------------------------------------------------------------------------------


def test_in_accepts_a_list_or_a_comma_separated_string() -> None:
    assert holds("in", "codes.0", ["Z9", "A1"])
    assert holds("in", "codes.0", "Z9, A1")
    assert holds("in", "amount", "10,25")  # numbers by the equals rules
    assert not holds("in", "codes.0", "Z9,A")
    assert holds("notIn", "codes.0", "Z9, Y8")
    assert not holds("in", "missing", ["x"])


# -- empty / notEmpty / exists --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["blank", "nothing", "empty_list", "empty_object", "missing"])
def test_empty_values(path: str) -> None:
    assert holds("empty", path, "ignored")
    assert not holds("notEmpty", path)


def test_exists_holds_for_present_empty_values_only() -> None:
    assert holds("exists", "blank")
    assert holds("exists", "nothing")
    assert holds("exists", "empty_list")
    assert not holds("exists", "missing")
    assert holds("notEmpty", "name", "ignored")


def test_is_empty() -> None:
    empties: tuple[Any, ...] = (None, "", [], {})
    assert all(is_empty(v) for v in empties)
    assert not any(is_empty(v) for v in (0, False, " ", [None], '""'))


# -- contains -------------------------------------------------------------------------------------


def test_contains_is_a_case_sensitive_substring_or_list_membership() -> None:
    assert holds("contains", "name", "Rive")
    assert not holds("contains", "name", "rive")
    assert holds("contains", "codes", "B2")
    # A list's elements are also its values (FHIRPath-style mapping), so "any value contains" holds.
    assert holds("contains", "codes", "B")
    assert not holds("contains", "codes", "b")
    assert holds("contains", "participant.actor.display", "Smith")
    assert holds("notContains", "codes", "C3")


# -- ordering -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "path", "expected", "result"),
    [
        ("greaterThan", "amount", 9, True),  # numerically, not "25" < "9"
        ("greaterThan", "copay", "9", True),
        ("lessThan", "amount", 25.5, True),
        ("greaterOrEqual", "copay", 25, True),
        ("lessOrEqual", "amount", "25.00", True),
        ("greaterThan", "amount", 25, False),
        # dates compare as instants in UTC, at the coarser precision
        ("greaterThan", "start", "2024-03-15T07:59:59Z", True),
        ("lessThan", "start", "2024-03-15T08:00:01Z", True),
        ("greaterThan", "start", "2024-03-15", False),  # equal at day precision
        ("greaterOrEqual", "start", "2024-03-15", True),
        ("greaterOrEqual", "month", "2024-03-31", True),
        ("lessOrEqual", "month", "2024-03-01", True),
        ("lessThan", "month", "2024-04-01", True),
        ("greaterThan", "hl7_date", "2024-03-14", True),  # HL7 vs FHIR spelling
        ("lessThan", "hl7_date", "2024-03-16T00:00:00Z", True),
        # else by code point
        ("lessThan", "codes.0", "B", True),
        ("greaterThan", "codes.0", "A", True),
        ("lessThan", "name", "a", True),  # "Rivera" < "a": uppercase sorts first
        ("greaterThan", "missing", 1, False),
        ("lessThan", "blank", "z", False),  # empty values are never ordered
        ("greaterThan", "participant.actor.display", "O", True),  # any value
    ],
)
def test_ordering(operator: str, path: str, expected: Any, result: bool) -> None:
    assert holds(operator, path, expected) is result


def test_hl7_date_times_with_offsets_equal_as_instants() -> None:
    """An HL7/X12 `YYYYMMDDHHMM[SS]±ZZZZ` is a full date-time with an offset too (SPEC §3.1)."""
    sent = Reading.of(["20240315103000-0500"])  # HL7 MSH-7
    assert evaluate("equals", "2024-03-15T15:30:00Z", sent).passed
    assert evaluate("equals", "202403151530+0000", sent).passed
    assert evaluate("in", ["x", "2024-03-15T17:30:00+02:00"], sent).passed
    assert not evaluate("equals", "2024-03-15T10:30:00Z", sent).passed
    assert not evaluate("equals", "2024-03-15T10:30:00", sent).passed  # no offset: not an instant
    assert not values_equal("20240315103000", "2024-03-15T10:30:00Z")


def test_hl7_instant_with_offset_orders_in_utc() -> None:
    reading = Reading.of(["202403151000+0200"])
    assert evaluate("lessThan", "2024-03-15T08:30:00Z", reading).passed
    assert not evaluate("greaterThan", "2024-03-15T08:00:00Z", reading).passed


def test_digit_only_dates_of_different_precision_order_as_dates_not_numbers() -> None:
    """`YYYYMMDD[HHMM[SS]]` on both sides compares at the coarser precision (SPEC §3.1), although
    both sides are also numeric strings: `20240315` < `202403141200` as numbers, not as dates."""
    sent = Reading.of(["20240315103000"])  # HL7 MSH-7
    assert not evaluate("greaterThan", "20240315", sent).passed  # the same day
    assert evaluate("lessOrEqual", "20240315", sent).passed
    assert evaluate("greaterOrEqual", "20240315", sent).passed
    assert not evaluate("lessThan", "202403141200", Reading.of(["20240315"])).passed
    assert evaluate("greaterThan", "202403141200", Reading.of(["20240315"])).passed
    # digit strings that are no calendar date still order as numbers
    assert evaluate("lessThan", "1000000000", Reading.of(["10000000"])).passed


def test_non_finite_numbers_never_raise() -> None:
    for operator in ("greaterThan", "lessThan", "equals", "in", "matches"):
        evaluate(operator, 1, read_dotted(DOC, "nan"))


# -- matches --------------------------------------------------------------------------------------


def test_matches_is_an_unanchored_search() -> None:
    assert holds("matches", "name", "ive")
    assert not holds("matches", "name", "^ive")
    assert holds("matches", "amount", "^2[0-9]$")
    assert holds("matches", "active", "^true$")
    assert not holds("matches", "missing", ".*")


@pytest.mark.parametrize("path", ["empty_list", "empty_object", "participant", "nothing"])
def test_matches_searches_text_never_the_spelling_of_an_array_or_object(path: str) -> None:
    """An empty array has no value to search, and an object is no text: `.*` must not hold."""
    assert not holds("matches", path, ".*")
    assert not holds("matches", path, "[\\[{]")


def test_invalid_pattern_fails_the_field_with_the_reason() -> None:
    outcome = evaluate("matches", "(unclosed", read_dotted(DOC, "name"))
    assert not outcome.passed
    assert outcome.error is not None and "invalid regular expression '(unclosed'" in outcome.error
    with pytest.raises(InvalidPattern, match="missing \\)"):
        compile_pattern("(unclosed")


def test_patterns_run_in_linear_time_syntax() -> None:
    # RE2 has no backreferences: a pattern that needs one is invalid rather than slow.
    with pytest.raises(InvalidPattern):
        compile_pattern("(a)\\1")


# -- read_key -------------------------------------------------------------------------------------


def test_read_key_prefers_the_exact_key_then_a_dotted_path() -> None:
    row = {"member.id": "M1", "member": {"id": "M2"}}
    assert read_key(row, "member.id").actual == "M1"
    assert read_key({"member": {"id": "M2"}}, "member.id").actual == "M2"
    assert not read_key(row, "other").found


# -- properties -----------------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=8),
)


@given(_SCALARS)
def test_every_scalar_equals_itself(value: Any) -> None:
    assert values_equal(value, value)
    assert evaluate("equals", value, Reading.of([value])).passed


@given(_SCALARS, _SCALARS)
def test_equality_is_symmetric(a: Any, b: Any) -> None:
    assert values_equal(a, b) == values_equal(b, a)


@given(st.integers(-(10**9), 10**9), st.integers(-(10**9), 10**9))
def test_numbers_and_numeric_strings_order_alike(a: int, b: int) -> None:
    assume(min(a, b) < 10**7)  # two 8+ digit strings may both be YYYYMMDD… dates, which order as dates
    as_number = evaluate("lessThan", b, Reading.of([a])).passed
    as_text = evaluate("lessThan", str(b), Reading.of([str(a)])).passed
    assert as_number == as_text == (a < b)
