"""Tier 3 of `voice-transcript` (issue 13): on by deployment or by the criterion's `tiers`, with
the SPEC guards applied to what it proposes, and an `error` when asked for without the extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.checks import _semantic, semantic_unavailable
from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid
from assay.core.state import VoiceTurn
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

needs_semantic = pytest.mark.skipif(semantic_unavailable() is not None, reason=semantic_unavailable() or "")
PHRASE = "physical therapy is covered"


def run(tmp_path: Path, text: str, **kwargs: Any) -> dict[str, Any]:
    tiers = kwargs.pop("tiers", None)
    assertion: dict[str, Any] = {"assert": "voice-transcript", "contains": [PHRASE]}
    if tiers:
        assertion["tiers"] = tiers
    root = write_snapshot(
        tmp_path / "snapshot", voice=[VoiceTurn("caller", "Hello."), VoiceTurn("agent", text)]
    )
    runs = verify_task([CriterionSpec(assertion)], open_snapshot(root), **kwargs).as_json()["criterion_runs"]
    return runs[0]  # type: ignore[no-any-return]


@pytest.mark.semantic
@needs_semantic
def test_deployment_switch_and_criterion_tiers(tmp_path: Path) -> None:
    text = "Physical therapy visits are a covered benefit."
    off = run(tmp_path, text)
    assert off["passed"] is False and off["evidence"]["tiers"] == ["exact", "fuzzy", "vocabulary"]
    on = run(tmp_path, text, semantic=True)
    found = on["evidence"]["phraseResults"][0]
    assert on["passed"] is True and found["method"] == "semantic" and found["turn"] == 1
    assert found["similarity"] >= _semantic.THRESHOLD and found["text"] == text.rstrip(".")
    assert on["evidence"]["semantic"] == {
        "model": "all-MiniLM-L6-v2-onnx-int8",
        "threshold": _semantic.THRESHOLD,
        "alignment": _semantic.ALIGNMENT,
    }
    asked = run(tmp_path, text, tiers=["exact", "fuzzy", "semantic"])
    assert asked["passed"] is True and asked["evidence"]["tiers"] == [
        "exact",
        "fuzzy",
        "vocabulary",
        "semantic",
    ]


@pytest.mark.semantic
@needs_semantic
def test_guards_apply_to_semantic_proposals(tmp_path: Path) -> None:
    negated = run(tmp_path, "Physical therapy visits are not a covered benefit.", semantic=True)
    assert negated["passed"] is False
    clause = run(
        tmp_path, "Good news, physical therapy visits are a covered benefit, up to 20 a year.", semantic=True
    )
    # The sentence holds a number the phrase lacks; its clause without it is what matches.
    assert clause["evidence"]["phraseResults"][0]["text"] == "physical therapy visits are a covered benefit"


def test_asking_for_semantic_without_the_extra_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        _semantic, "semantic_unavailable", lambda: "the semantic tier needs the `semantic` extra"
    )
    result = run(tmp_path, "Physical therapy is covered.", tiers=["exact", "semantic"])
    assert result["status"] == "error" and result["details"] == "the semantic tier needs the `semantic` extra"


def test_tiers_must_include_exact_and_name_known_tiers() -> None:
    for tiers in (["fuzzy"], ["exact", "psychic"]):
        with pytest.raises(AssertionInvalid) as raised:
            parse_assertion({"assert": "voice-transcript", "contains": ["a"], "tiers": tiers})
        assert any(key.startswith("tiers") for key in raised.value.errors)
