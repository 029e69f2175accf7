"""`natural-language` evals (SPEC §8, issue 13): the shape, and what happens with no judge.

Judged runs (a real HTTP judge, garbage, timeouts, replay on rescore) are in tests/judge/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.core.assertions import NaturalLanguage, parse_assertion
from assay.core.errors import AssertionInvalid
from assay.core.state import VoiceTurn
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

EVAL = {"assert": "natural-language", "text": "The agent read back the member ID before ending the call."}


def test_the_shape_parses_and_round_trips() -> None:
    parsed = parse_assertion(EVAL)
    assert isinstance(parsed, NaturalLanguage)
    assert parsed.dump() == EVAL


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"assert": "natural-language"}, "text"),
        ({"assert": "natural-language", "text": "  ?! "}, "text"),
        ({"assert": "natural-language", "text": 3}, "text"),
        ({"assert": "natural-language", "text": "ok", "judge": "gpt"}, "judge"),
    ],
)
def test_bad_shapes_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(AssertionInvalid) as raised:
        parse_assertion(data)
    assert key in raised.value.errors


def test_without_a_judge_it_is_recorded_as_unsupported(tmp_path: Path) -> None:
    root = write_snapshot(tmp_path / "snapshot", voice=[VoiceTurn("agent", "Your member ID is M123.")])
    run = verify_task([CriterionSpec(EVAL)], open_snapshot(root)).as_json()["criterion_runs"][0]
    assert run["status"] == "ok" and run["passed"] is False and run["score"] == 0.0
    assert run["details"] == (
        "unsupported assertion: natural-language eval needs an LLM judge and none is configured "
        "(set ASSAY_JUDGE_URL)"
    )
    assert run["evidence"] == {"text": EVAL["text"]}
