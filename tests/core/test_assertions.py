"""The assertion union (SPEC §3): parsing, errors keyed by dotted path, and the check registry."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any

import pytest

from assay.checks import CHECKS
from assay.core.assertions import ASSERTION_MODELS, AssertionModel, SftpFilePresent, parse_assertion
from assay.core.errors import AssertionInvalid
from assay.core.state import VoiceTurn
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

EXAMPLES: dict[str, dict[str, Any]] = {
    "fhir-resource-state": {
        "assert": "fhir-resource-state",
        "resource_type": "Appointment",
        "search": {"patient": "Patient/john-smith", "status": "booked"},
        "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
    },
    "hl7-structural": {
        "assert": "hl7-structural",
        "correlate_by": {"message_type": "ADT^A04"},
        "fields": [{"path": "PID.5.1", "expected": "SMITH"}],
    },
    "no-unexpected-changes": {
        "assert": "no-unexpected-changes",
        "surfaces": ["fhir", "files"],
        "allow": [
            {"resourceType": "Appointment", "change": "created", "search": {"patient": "Patient/p1"}},
            {"path": "outbound/*.pdf"},
        ],
    },
    "natural-language": {
        "assert": "natural-language",
        "text": "The agent confirmed the member's date of birth before discussing benefits.",
    },
    "portal-state-match": {
        "assert": "portal-state-match",
        "portal": None,
        "correlate_by": {"resource": "prior_auth_requests", "key": "member_id"},
        "assertions": [{"path": "status", "expected": {"code": "approved"}}],
    },
    "sftp-file-present": {
        "assert": "sftp-file-present",
        "path_pattern": "outbound/*.json",
        "parse_json": True,
        "fields": [{"key": "name", "expected": "a.json"}, {"path": "claim.id", "expected": "C1"}],
    },
    "voice-call": {
        "assert": "voice-call",
        "reached": "rep",
        "reference_captured_in": [{"surface": "portal", "resource": "call_notes"}],
        "max_latency_ms": 3000,
    },
    "voice-transcript": {
        "assert": "voice-transcript",
        "speaker": "agent",
        "contains": ["member ID", "date of birth"],
    },
    "x12-response": {
        "assert": "x12-response",
        "transaction": "271",
        "correlate_by": {"member_id": "M1"},
        "fields": [{"path": "2110C/EB[1]03", "expected": "30"}],
    },
}


def _union_tags() -> set[str]:
    """The `assert` tags of the `AssertionModel` union, read from each model's `assert_` Literal."""
    return {
        tag
        for model in typing.get_args(AssertionModel)
        for tag in typing.get_args(model.model_fields["assert_"].annotation)
    }


@pytest.mark.parametrize("tag", sorted(EXAMPLES))
def test_every_type_parses_and_round_trips(tag: str) -> None:
    parsed = parse_assertion(EXAMPLES[tag])
    assert parsed.assert_ == tag
    assert type(parsed) is ASSERTION_MODELS[tag]
    dumped = parsed.dump()
    assert next(iter(dumped)) == "assert"
    assert parse_assertion(dumped) == parsed


def test_examples_cover_the_union() -> None:
    assert set(EXAMPLES) == set(ASSERTION_MODELS) == _union_tags()


def errors_of(data: Any) -> dict[str, list[str]]:
    with pytest.raises(AssertionInvalid) as caught:
        parse_assertion(data)
    return caught.value.errors


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        ({"assert": "fhir-search"}, "assert", "unknown assertion type 'fhir-search'"),
        ({"resource_type": "Patient"}, "assert", "missing required key `assert`"),
        ({"assert": "fhir-resource-state"}, "resource_type", "missing required key 'resource_type'"),
        (
            {"assert": "portal-state-match", "correlate_by": {"resource": "rows"}},
            "correlate_by.key",
            "missing required key 'key'",
        ),
        ({**EXAMPLES["voice-transcript"], "speech": "x"}, "speech", "unknown key 'speech'"),
        (
            {
                **EXAMPLES["fhir-resource-state"],
                "fields": [{"path": "id", "expected": "1", "operatr": "equals"}],
            },
            "fields.0.operatr",
            "unknown key 'operatr'",
        ),
        ({"assert": "voice-transcript", "contains": "member ID"}, "contains", "Input should be a valid list"),
        ({"assert": "voice-transcript", "speaker": "nurse"}, "speaker", "Input should be 'agent'"),
        (
            {**EXAMPLES["fhir-resource-state"], "fields": [{"path": "status", "expected": ["a", "b"]}]},
            "fields.0.expected",
            "a list `expected` needs operator in or notIn, not equals",
        ),
        (
            {**EXAMPLES["fhir-resource-state"], "fields": [{"path": "status", "expected": {"a": 1}}]},
            "fields.0.expected",
            "`expected` must be a string, number, boolean or null, not an object",
        ),
        (
            {
                **EXAMPLES["portal-state-match"],
                "assertions": [{"path": "n", "operator": "greaterThan", "expected": [1]}],
            },
            "assertions.0.expected",
            "an array or object `expected` needs operator",
        ),
        (
            {
                **EXAMPLES["sftp-file-present"],
                "fields": [{"key": "name", "operator": "matches", "expected": "("}],
            },
            "fields.0.expected",
            "invalid regular expression",
        ),
        ({**EXAMPLES["sftp-file-present"], "path": "a.json"}, "", "exactly one of path / path_pattern"),
        ({**EXAMPLES["fhir-resource-state"], "match": "best"}, "match", "Input should be"),
        (
            {**EXAMPLES["fhir-resource-state"], "fields": [{"path": "id", "operator": "like"}]},
            "fields.0.operator",
            "",
        ),
        ([1, 2], "", "an assertion must be a JSON object, not an array"),
    ],
)
def test_invalid_assertions_name_the_dotted_key(data: Any, key: str, message: str) -> None:
    errors = errors_of(data)
    assert key in errors, errors
    assert any(message in text for text in errors[key]), errors[key]


def test_list_expected_is_fine_for_in_and_portal_equality() -> None:
    fhir = {
        **EXAMPLES["fhir-resource-state"],
        "fields": [{"path": "status", "operator": "in", "expected": ["a"]}],
    }
    parse_assertion(fhir)
    portal = {**EXAMPLES["portal-state-match"], "assertions": [{"path": "tags", "expected": ["a", {"b": 1}]}]}
    parse_assertion(portal)


@pytest.mark.parametrize("operator", ["empty", "notEmpty", "exists"])
@pytest.mark.parametrize("expected", [["a", "b"], {"a": 1}, "x"])
def test_operators_without_expected_ignore_whatever_is_given(operator: str, expected: Any) -> None:
    """SPEC §3.1: `empty`, `notEmpty` and `exists` take no `expected` (ignored if given)."""
    for tag, key in (("fhir-resource-state", "fields"), ("portal-state-match", "assertions")):
        data = {**EXAMPLES[tag], key: [{"path": "status", "operator": operator, "expected": expected}]}
        parse_assertion(data)


def test_invalid_pattern_parses_at_verify_time() -> None:
    data = {
        **EXAMPLES["sftp-file-present"],
        "fields": [{"key": "name", "operator": "matches", "expected": "("}],
    }
    parsed = parse_assertion(data, at_verify=True)
    assert isinstance(parsed, SftpFilePresent)
    assert parsed.fields[0].expected == "("


def test_portal_value_given_as_null_differs_from_not_given() -> None:
    given_null = parse_assertion(
        {"assert": "portal-state-match", "correlate_by": {"resource": "r", "key": "k", "value": None}}
    )
    not_given = parse_assertion(
        {"assert": "portal-state-match", "correlate_by": {"resource": "r", "key": "k"}}
    )
    assert "value" in given_null.correlate_by.model_fields_set  # type: ignore[union-attr]
    assert "value" not in not_given.correlate_by.model_fields_set  # type: ignore[union-attr]


def test_unsupported_assertions_never_abort_the_others(tmp_path: Path) -> None:
    root = write_snapshot(tmp_path / "snapshot", voice=[VoiceTurn("agent", "Can I have your member ID?")])
    criteria = [
        CriterionSpec({"assert": "no-such-check", "x": 1}, label="legacy"),
        CriterionSpec({"assert": "voice-transcript", "contains": ["member ID"]}, label="ok"),
        CriterionSpec(
            {"assert": "voice-transcript", "contains": ["member ID"], "speakr": "agent"}, label="typo"
        ),
        CriterionSpec("a natural-language eval", label="text"),
    ]
    runs = verify_task(criteria, open_snapshot(root)).as_json()["criterion_runs"]
    assert [run["label"] for run in runs] == ["legacy", "ok", "typo", "text"]
    for run in (runs[0], runs[2], runs[3]):
        assert run["details"].startswith("unsupported assertion:")
        assert (run["status"], run["passed"], run["score"]) == ("ok", False, 0.0)
    assert "(at assert)" in runs[0]["details"]
    assert "unknown key 'speakr' (at speakr)" in runs[2]["details"]
    assert runs[1]["passed"] is True


# -- the check registry ---------------------------------------------------------------------------


def test_every_registered_check_is_a_known_assertion_tag() -> None:
    assert set(CHECKS) <= _union_tags()
    assert {"portal-state-match", "sftp-file-present", "voice-transcript"} <= set(CHECKS)


def test_every_check_takes_assertion_state_context() -> None:
    for tag, check in CHECKS.items():
        assert list(inspect.signature(check).parameters) == ["assertion", "state", "context"], tag


def test_registry_keys_equal_the_union_tags() -> None:
    """Every assertion type has exactly one check (style.md: fail early and by name)."""
    assert set(CHECKS) == _union_tags() == set(ASSERTION_MODELS)
