"""Date ranges and R4 prefix semantics (SPEC §3.2), with hypothesis properties; value parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.formats.fhir import FhirStore, InvalidSearch, parse_search
from assay.formats.fhir.dates import NEG_INF, POS_INF, DateRange, date_range, matches_range
from assay.formats.fhir.search_terms import TokenQuery

PREFIXES = ("eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap")
DAY = 86_400_000_000


def micros(text: str) -> int:
    found = date_range(text)
    assert found is not None
    return found.low


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("2019", "2019-01-01T00:00:00Z", "2020-01-01T00:00:00Z"),
        ("2019-12", "2019-12-01T00:00:00Z", "2020-01-01T00:00:00Z"),
        ("2019-02-28", "2019-02-28T00:00:00Z", "2019-03-01T00:00:00Z"),
        ("2019-02-28T10:00", "2019-02-28T10:00:00Z", "2019-02-28T10:01:00Z"),
        ("2019-02-28T10:00:05+01:00", "2019-02-28T09:00:05Z", "2019-02-28T09:00:06Z"),
    ],
)
def test_partial_dates_are_ranges(text: str, low: str, high: str) -> None:
    assert date_range(text) == DateRange(micros(low), micros(high))


@pytest.mark.parametrize("text", ["2019-13", "2019-02-30", "19", "2019/01/01", "2019-01-01T25:00", "today"])
def test_malformed_dates(text: str) -> None:
    assert date_range(text) is None


dates = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
precisions = st.sampled_from(["%Y", "%Y-%m", "%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%SZ"])


def as_range(moment: datetime, precision: str) -> DateRange:
    found = date_range(moment.strftime(precision))
    assert found is not None
    return found


@given(dates, precisions, precisions)
def test_coarser_precision_contains_finer(moment: datetime, one: str, other: str) -> None:
    a, b = as_range(moment, one), as_range(moment, other)
    assert a.low < a.high
    if len(one) <= len(other):
        assert a.low <= b.low and b.high <= a.high


targets = st.builds(
    lambda lo, width, open_low, open_high: DateRange(
        NEG_INF if open_low else lo, POS_INF if open_high else lo + width
    ),
    st.integers(-(2**40), 2**40),
    st.integers(1, 2**36),
    st.booleans(),
    st.booleans(),
)
searches = st.builds(
    lambda lo, width: DateRange(lo, lo + width), st.integers(-(2**40), 2**40), st.integers(1, 2**36)
)


@given(searches, targets)
def test_prefix_relations(search: DateRange, target: DateRange) -> None:
    result = {p: matches_range(p, search, target, now=0) for p in PREFIXES}
    assert result["ne"] == (not result["eq"])
    assert result["ge"] == (result["gt"] or result["eq"])
    assert result["le"] == (result["lt"] or result["eq"])
    if result["sa"]:
        assert result["gt"] and not result["eq"] and not result["lt"]
    if result["eb"]:
        assert result["lt"] and not result["eq"] and not result["gt"]
    if result["eq"]:
        assert result["ap"]


@given(dates, precisions)
def test_a_date_equals_itself_and_an_open_period_is_after_everything(
    moment: datetime, precision: str
) -> None:
    text = moment.strftime(precision)
    own = as_range(moment, precision)
    assert matches_range("eq", own, own)
    open_end = DateRange(own.low, POS_INF)
    assert matches_range("gt", own, open_end)
    assert not matches_range("eq", own, open_end)
    store = FhirStore([{"resourceType": "Encounter", "id": "e", "period": {"start": text}}])
    assert [r["id"] for r in store.search("Encounter", {"date": f"ge{text}"})] == ["e"]
    assert store.search("Encounter", {"date": f"lt{text}"}) == []


def test_ap_is_ten_percent_of_the_distance_to_now_and_at_least_a_day() -> None:
    now = micros("2025-01-01T00:00:00Z")
    near = DateRange(micros("2024-12-31"), micros("2025-01-01"))
    assert matches_range("ap", near, DateRange(near.high + DAY - 1, near.high + DAY), now=now)
    assert not matches_range("ap", near, DateRange(near.high + DAY + 1, near.high + 2 * DAY), now=now)
    far = DateRange(micros("2015-01-01"), micros("2015-01-02"))
    target = micros("2015-01-02") + 300 * DAY
    assert matches_range("ap", far, DateRange(target, target + 1), now=now)


def test_ap_on_a_resource_relative_to_today() -> None:
    recent = (datetime.now(UTC) - timedelta(days=100)).strftime("%Y-%m-%d")
    nearby = (datetime.now(UTC) - timedelta(days=105)).strftime("%Y-%m-%d")
    store = FhirStore([{"resourceType": "Encounter", "id": "e", "period": {"start": recent, "end": recent}}])
    assert [r["id"] for r in store.search("Encounter", {"date": f"ap{nearby}"})] == ["e"]
    assert store.search("Encounter", {"date": "ap1990-01-01"}) == []


# -- parameter parsing --------------------------------------------------------------------------

codes = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="|"), min_size=1
).filter(lambda s: s.strip() == s)


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("$", "\\$")


@given(st.lists(codes, min_size=1, max_size=5))
def test_commas_are_or_and_escaped_commas_are_kept(values: list[str]) -> None:
    parsed = parse_search("Patient", {"identifier": ",".join(escape(v) for v in values)})
    (criterion,) = parsed.criteria
    assert [q.code for q in criterion.values if isinstance(q, TokenQuery)] == values


@given(st.lists(st.sampled_from(["ge2019", "lt2020-06", "2019-05-01", "ne2019"]), min_size=1, max_size=4))
def test_a_list_repeats_the_parameter(values: list[str]) -> None:
    parsed = parse_search("Encounter", {"date": values})
    assert len(parsed.criteria) == len(values)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"date": "xx2019"}, "invalid prefix 'xx'"),
        ({"date": "ge"}, "invalid date 'ge'"),
        ({"length": "abc"}, "invalid number 'abc'"),
        ({"length": "1|2"}, "invalid quantity"),
        ({"date:missing": "maybe"}, "takes true or false"),
        ({"_count": "-1"}, "_count must be a whole number"),
    ],
)
def test_bad_values(params: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidSearch, match=message):
        parse_search("Encounter", params)


def test_parsed_search_keeps_what_a_rest_layer_needs() -> None:
    parsed = parse_search(
        "Encounter",
        {
            "_include": "Encounter:patient",
            "_summary": "count",
            "_sort": "-date",
            "_count": "5",
            "status": "finished",
        },
    )
    assert parsed.includes == ("_include=Encounter:patient",)
    assert parsed.ignored == {"_summary": ("count",)}
    assert [(k.parameter.code, k.descending) for k in parsed.sort] == [("date", True)]
    assert parsed.count == 5
    assert [c.key for c in parsed.criteria] == ["status"]
