"""`verify_task`: errors are `status: "error"` and count as 0; they never abort the task (SPEC §2, §3.1, §4).

The checks are swapped for stand-ins through the registry, the seam `verify_task` dispatches on.
A check past its time limit blocks on an event instead of sleeping, so no test waits on a clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from assay.checks import CHECKS, CheckContext
from assay.core.results import CriterionResult
from assay.core.state import SandboxState
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

VOICE = {"assert": "voice-transcript", "contains": []}  # scores 1 with the real check
PORTAL = {"assert": "portal-state-match", "correlate_by": {"resource": "claims", "key": "id"}}


@pytest.fixture
def state(tmp_path: Path) -> SandboxState:
    return open_snapshot(write_snapshot(tmp_path / "snap"))


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set after the test, so an abandoned check thread ends."""
    event = threading.Event()
    yield event
    event.set()


def test_a_check_past_its_time_limit_is_an_error_that_counts_as_zero(
    state: SandboxState, release: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stuck(assertion: Any, state: SandboxState, context: CheckContext) -> CriterionResult:
        release.wait()
        return CriterionResult(Fraction(1), "too late")

    monkeypatch.setitem(CHECKS, "portal-state-match", stuck)
    result = verify_task(
        [CriterionSpec(PORTAL, "stuck", axis="safety"), CriterionSpec(VOICE, "voice", axis="safety")],
        state,
        time_limit=0.05,
    ).as_json()
    stuck_run, voice_run = result["criterion_runs"]
    assert stuck_run["status"] == "error"
    assert (stuck_run["passed"], stuck_run["score"]) == (False, 0.0)
    assert "time limit" in stuck_run["details"]
    assert (voice_run["status"], voice_run["score"]) == ("ok", 1.0)  # the next check still runs
    assert (result["score"], result["verdict"]) == (0.5, "partial")
    assert result["axes"] == {"safety": {"score": 0.5, "weight": 2}}


def test_a_check_that_raises_is_an_error_not_a_crash(
    state: SandboxState, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(assertion: Any, state: SandboxState, context: CheckContext) -> CriterionResult:
        raise ConnectionError("FHIR server down")

    monkeypatch.setitem(CHECKS, "portal-state-match", broken)
    result = verify_task([CriterionSpec(PORTAL), CriterionSpec(VOICE)], state).as_json()
    broken_run, voice_run = result["criterion_runs"]
    assert broken_run["status"] == "error"
    assert (broken_run["passed"], broken_run["score"]) == (False, 0.0)
    assert "FHIR server down" in broken_run["details"]
    assert voice_run["passed"] is True


def test_an_error_with_score_one_still_counts_as_zero(
    state: SandboxState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`status: error` is 0 whatever score the check put in it (SPEC §4)."""

    def odd(assertion: Any, state: SandboxState, context: CheckContext) -> CriterionResult:
        return CriterionResult(Fraction(1), "store down", status="error")

    monkeypatch.setitem(CHECKS, "portal-state-match", odd)
    result = verify_task([CriterionSpec(PORTAL)], state).as_json()
    assert result["criterion_runs"][0]["passed"] is False
    assert (result["score"], result["verdict"]) == (0.0, "fail")


def test_unsupported_and_bad_weight_never_abort_the_others(state: SandboxState) -> None:
    criteria = [
        CriterionSpec.from_json({"assertion": {"assert": "nope"}}, 0),
        CriterionSpec.from_json({"assertion": VOICE, "weight": 0}, 1),
        CriterionSpec.from_json({"assertion": {"assert": "voice-transcript", "speaker": "robot"}}, 2),
        CriterionSpec.from_json({"assertion": VOICE, "label": "ok"}, 3),
    ]
    runs = verify_task(criteria, state).as_json()["criterion_runs"]
    assert [run["label"] for run in runs] == ["criterion 1", "criterion 2", "criterion 3", "ok"]
    for run in runs[:3]:
        assert (run["status"], run["passed"], run["score"]) == ("ok", False, 0.0)
        assert run["details"].startswith("unsupported assertion: ")
    assert runs[3]["passed"] is True


def test_a_non_string_axis_or_input_entity_id_is_unsupported_not_a_crash(state: SandboxState) -> None:
    """A task file may hold any YAML: a list axis used to crash scoring, a list id the entity lookup."""
    criteria = [
        CriterionSpec.from_json({"assertion": VOICE, "axis": ["a"]}, 0),
        CriterionSpec.from_json({"assertion": VOICE, "input_entity_id": [1]}, 1),
        CriterionSpec.from_json({"assertion": VOICE, "axis": "speech"}, 2),
    ]
    result = verify_task(criteria, state).as_json()
    runs = result["criterion_runs"]
    assert runs[0]["details"] == "unsupported assertion: axis must be a string"
    assert runs[1]["details"] == "unsupported assertion: input_entity_id must be a string"
    assert [run["axis"] for run in runs] == [None, None, "speech"]
    assert runs[2]["passed"] is True
    assert set(result["axes"]) == {"__default__", "speech"}


def test_a_required_criterion_that_fails_gates_the_task(state: SandboxState) -> None:
    criteria = [
        CriterionSpec.from_json({"label": "said nothing wrong", "assertion": VOICE, "weight": 3}),
        CriterionSpec.from_json({"label": "portal row", "assertion": PORTAL, "required": True}, 1),
    ]
    result = verify_task(criteria, state).as_json()
    assert result["score"] == 0 and result["verdict"] == "fail"
    assert result["gated_by"] == {"position": 1, "label": "portal row", "ungated_score": 0.75}


def test_required_must_be_true_or_false(state: SandboxState) -> None:
    spec = CriterionSpec.from_json({"assertion": VOICE, "required": "yes"})
    (run,) = verify_task([spec], state).runs
    assert not run.result.passed and "required must be true or false" in run.result.details
