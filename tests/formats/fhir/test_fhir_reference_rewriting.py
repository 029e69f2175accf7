"""The one reference walker (`rewrite_references`) and the one reading of `Type?params` references
(`parse_conditional_reference`) that dataset loading (SPEC §5.1) and the FHIR sandbox share."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.formats.fhir.bundles import (
    ConditionalReference,
    parse_conditional_reference,
    resources_from_bundle,
    rewrite_references,
)

_KEYS = st.sampled_from(["reference", "subject", "entry", "contained", "display", "extension"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30,
)


def _expected(value: Any, mapping: Any, seen: list[str]) -> Any:
    """An independent, copying oracle: a node's own `reference` first, then its children."""
    if isinstance(value, list):
        return [_expected(item, mapping, seen) for item in value]
    if not isinstance(value, dict):
        return value
    out = dict(value)
    if isinstance(value.get("reference"), str):
        seen.append(value["reference"])
        mapped = mapping(value["reference"])
        out["reference"] = value["reference"] if mapped is None else mapped
    for key, item in value.items():
        if isinstance(item, dict | list):
            out[key] = _expected(item, mapping, seen)
    return out


@settings(max_examples=200, derandomize=True)
@given(_JSON)
def test_rewrite_matches_the_oracle_in_document_order(value: Any) -> None:
    def mapping(text: str) -> str | None:
        calls.append(text)
        return None if len(text) % 2 else f"Patient/{len(text)}"

    calls: list[str] = []
    seen: list[str] = []
    expected = _expected(copy.deepcopy(value), mapping, seen)
    calls.clear()
    original = copy.deepcopy(value)
    result = rewrite_references(value, mapping)
    assert result is value
    assert result == expected
    assert calls == seen
    assert rewrite_references(original, lambda _: None) == original


class _Dict(dict[str, Any]):
    pass


class _List(list[Any]):
    pass


class _Text(str):
    __slots__ = ()


def _subclassed(value: Any, depth: int = 0) -> Any:
    """`value` with every other container (and every other string) an instance of a subclass."""
    if isinstance(value, dict):
        out = {key: _subclassed(item, depth + 1) for key, item in value.items()}
        return _Dict(out) if depth % 2 else out
    if isinstance(value, list):
        items = [_subclassed(item, depth + 1) for item in value]
        return _List(items) if depth % 2 == 0 else items
    if isinstance(value, str) and depth % 2:
        return _Text(value)
    return value


@settings(max_examples=200, derandomize=True)
@given(_JSON)
def test_subclasses_of_dict_list_and_str_are_walked_as_before(value: Any) -> None:
    """The walk tests exact classes first (decoded JSON's) and `isinstance` after: a subclass is
    still a container, or a reference, exactly as under the `isinstance`-only walk."""
    value = _subclassed(value)
    calls: list[str] = []
    seen: list[str] = []

    def mapping(text: str) -> str | None:
        calls.append(text)
        return None if len(text) % 2 else f"Patient/{len(text)}"

    expected = _expected(copy.deepcopy(value), mapping, seen)
    calls.clear()
    assert rewrite_references(value, mapping) == expected
    assert calls == seen


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("Patient?identifier=urn:mrn|42", ConditionalReference("Patient", "identifier=urn:mrn|42",
                                                               (("identifier", "urn:mrn|42"),))),
        ("Practitioner?identifier=a&name=", ConditionalReference("Practitioner", "identifier=a&name=",
                                                                 (("identifier", "a"), ("name", "")))),
        ("Patient?", ConditionalReference("Patient", "", ())),
        ("Patient?a=1?b", ConditionalReference("Patient", "a=1?b", (("a", "1?b"),))),
    ],
)  # fmt: skip
def test_conditional_references_parse(text: str, parsed: ConditionalReference) -> None:
    assert parse_conditional_reference(text) == parsed


@pytest.mark.parametrize(
    "text",
    ["Patient/1", "Patient/1?x=y", "patient?identifier=x", "http://x/fhir/Patient?identifier=x",
     "urn:uuid:1?x", "#contained?x", "P?x=1", " Patient?x=1", "?x=1"],
)  # fmt: skip
def test_other_references_are_not_conditional(text: str) -> None:
    assert parse_conditional_reference(text) is None


def _loaded_reference(reference: str) -> str:
    """The reference an Encounter keeps after SPEC §5.1 loading beside two Practitioners that share
    an identifier."""
    practitioners = [
        {"resourceType": "Practitioner", "id": rid, "identifier": [{"system": "npi", "value": "1"}]}
        for rid in ("a", "b")
    ]
    encounter = {
        "resourceType": "Encounter",
        "id": "e",
        "participant": [{"individual": {"reference": reference}}],
    }
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": resource} for resource in [*practitioners, encounter]
    ]}  # fmt: skip
    [loaded] = [r for r in resources_from_bundle(bundle) if r["resourceType"] == "Encounter"]
    return str(loaded["participant"][0]["individual"]["reference"])


@pytest.mark.parametrize("controls", ["_count=1", "_sort=-_id&_count=1", "_count=1&_elements=id"])
def test_result_controls_cannot_make_an_ambiguous_reference_resolve(controls: str) -> None:
    """SPEC §5.1 rewrites a conditional reference only when exactly one resource matches; `_count=1`
    capped the search at one and the ambiguous reference was rewritten to whichever came first.
    Parameters that shape a page are not criteria (R4 http.html), as in the sandbox's bundles."""
    ambiguous = f"Practitioner?identifier=npi|1&{controls}"
    assert _loaded_reference(ambiguous) == ambiguous
    assert _loaded_reference("Practitioner?_id=b&_count=1") == "Practitioner/b"
