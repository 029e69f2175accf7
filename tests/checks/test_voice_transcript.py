"""`voice-transcript` end to end: real clinic transcripts as voice turns → snapshot → verify_task.

Transcripts come from `tests/fixtures/voice/` (provenance in tests/fixtures/SOURCES.md):
ACI-Bench ASR encounters (`[doctor] …` / `[patient] …` lines, lowercase, ASR spacing such as
`ca n't`) and MTS-Dialog (`Doctor: …` / `Patient: …`). The doctor is the agent, the patient the
caller.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import FIXTURES

from assay.checks import CheckContext, voice_transcript
from assay.checks._speech import normalise
from assay.core.assertions import parse_assertion
from assay.core.state import VoiceTurn
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

SPEAKERS = {"doctor": "agent", "patient": "caller"}


def aci_encounter(index: int = 0) -> list[VoiceTurn]:
    """One ACI-Bench ASR encounter as turns."""
    data = json.loads((FIXTURES / "voice/aci-bench/valid_aci_asr.json").read_text(encoding="utf-8"))
    turns = []
    for line in data["data"][index]["src"].splitlines():
        role, _, text = line.partition("] ")
        turns.append(VoiceTurn(SPEAKERS[role.lstrip("[")], text))
    return turns


def mts_dialogue(index: int = 0) -> list[VoiceTurn]:
    """One MTS-Dialog dialogue (`Doctor: …` lines) as turns."""
    with (FIXTURES / "voice/mts-dialog/MTS-Dialog-ValidationSet.csv").open(encoding="utf-8") as handle:
        row = list(csv.DictReader(handle))[index]
    turns = []
    for line in row["dialogue"].splitlines():
        role, _, text = line.strip().partition(": ")
        if role.casefold() in SPEAKERS:
            turns.append(VoiceTurn(SPEAKERS[role.casefold()], text))
    return turns


def run(tmp_path: Path, turns: list[VoiceTurn], **assertion: Any) -> dict[str, Any]:
    root = write_snapshot(tmp_path / "snapshot", voice=turns)
    spec = CriterionSpec({"assert": "voice-transcript", **assertion})
    return verify_task([spec], open_snapshot(root)).as_json()["criterion_runs"][0]


def phrase(result: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return result["evidence"]["phraseResults"][index]


@pytest.fixture(scope="module")
def encounter() -> list[VoiceTurn]:
    return aci_encounter(0)


def test_number_words_on_both_sides_match_exactly(tmp_path: Path, encounter: list[VoiceTurn]) -> None:
    result = run(
        tmp_path, encounter, speaker="agent", contains=["On a scale of 1 to 10, how severe is the pain?"]
    )
    assert result["passed"] is True
    assert phrase(result) == {
        "phrase": "On a scale of 1 to 10, how severe is the pain?",
        "kind": "contains",
        "found": True,
        "passed": True,
        "turn": 6,
        "speaker": "agent",
        "text": "on a scale of one to ten how severe is the pain",
        "method": "exact",
        "similarity": 1.0,
    }
    assert result["details"] == "Transcript matched; 1 of 1 phrase assertions passed."


def test_turn_index_counts_every_speaker_and_speaker_filters(
    tmp_path: Path, encounter: list[VoiceTurn]
) -> None:
    result = run(
        tmp_path, encounter, speaker="caller", contains=["it's like a nine", "how severe is the pain"]
    )
    first, second = result["evidence"]["phraseResults"]
    assert (first["found"], first["turn"], first["speaker"]) == (True, 7, "caller")
    assert second["found"] is False and second["turn"] is None and second["method"] is None
    assert result["score"] == 0.5
    assert result["details"] == "Transcript matched; 1 of 2 phrase assertions passed."


def test_number_guard_rejects_a_near_match_with_another_number(
    tmp_path: Path, encounter: list[VoiceTurn]
) -> None:
    result = run(
        tmp_path,
        encounter,
        contains=["wearing the brace for about six weeks", "wearing the brace for about eight weeks"],
    )
    right, wrong = result["evidence"]["phraseResults"]
    assert right["found"] is True and right["turn"] == 64
    assert wrong["found"] is False


def test_fuzzy_tier_tolerates_a_misspelling_and_reports_similarity(
    tmp_path: Path, encounter: list[VoiceTurn]
) -> None:
    result = run(tmp_path, encounter, contains=["be wearing the brase for about 6 weeks"])
    found = phrase(result)
    assert found["found"] is True and found["method"] == "fuzzy"
    assert found["turn"] == 64
    assert 0.9 <= found["similarity"] < 1.0
    assert "brace" in found["text"]


def test_negation_guard_rejects_a_negated_span(tmp_path: Path, encounter: list[VoiceTurn]) -> None:
    # Turn 52: "okay yeah no i do n't think i understand completely".
    result = run(
        tmp_path, encounter, contains=["i understand completely", "i do not think i understand completely"]
    )
    plain, negated = result["evidence"]["phraseResults"]
    assert plain["found"] is False
    assert negated["found"] is True and negated["turn"] == 52 and negated["method"] == "exact"


def test_negation_in_the_phrase_is_not_matched_by_an_affirmative_turn(tmp_path: Path) -> None:
    turns = [VoiceTurn("agent", "Good news: prior authorization is required for this MRI.")]
    result = run(tmp_path, turns, contains=["prior authorization is not required"])
    assert phrase(result)["found"] is False


def test_spec_examples_for_the_guards(tmp_path: Path) -> None:
    turns = [
        VoiceTurn("ivr", "Please say or enter your member-ID."),
        VoiceTurn("agent", "No prior authorization is required. The copay is $35."),
    ]
    result = run(
        tmp_path,
        turns,
        contains=[
            "member ID",
            "prior authorization is required",
            "the copay is $25",
            "the copay is twenty five dollars",
            "the copay is thirty five dollars",
        ],
    )
    found = [entry["found"] for entry in result["evidence"]["phraseResults"]]
    assert found == [True, False, False, False, True]
    assert phrase(result)["speaker"] == "ivr"


def test_an_amount_with_zero_cents_is_the_same_number(tmp_path: Path) -> None:
    """Tier 1 replaces punctuation by spaces (SPEC §3.6), so `$25.00` holds the words of `$25`;
    the guard still tells `$25` from `$25.50`."""
    turns = [VoiceTurn("agent", "Your copay is $25.00 today."), VoiceTurn("agent", "Coinsurance is $12.50.")]
    result = run(
        tmp_path,
        turns,
        contains=["copay is $25", "copay is twenty-five", "coinsurance is $12.5", "coinsurance is $12"],
    )
    found = [(entry["found"], entry["method"]) for entry in result["evidence"]["phraseResults"]]
    assert found == [(True, "exact"), (True, "exact"), (True, "exact"), (False, None)]
    assert result["evidence"]["phraseResults"][0]["text"] == "copay is $25.00"


def test_a_negation_without_its_apostrophe_is_still_a_negation(tmp_path: Path) -> None:
    """ASR drops apostrophes ("wasnt"); read as "was not", the guard sees the negation that a
    near-spelling of "was" would otherwise hide from it."""
    turns = [VoiceTurn("agent", "the claim wasnt denied yet, its still pending")]
    result = run(tmp_path, turns, contains=["the claim was denied", "the claim was not denied"])
    found = [(entry["found"], entry["method"]) for entry in result["evidence"]["phraseResults"]]
    assert found == [(False, None), (True, "exact")]


def test_an_amount_said_in_words_is_the_amount_written(tmp_path: Path) -> None:
    """ASR writes "$142.60" as "142 dollars and 60 cents"; the number guard still compares the
    amounts, so a near amount never matches."""
    turns = [VoiceTurn("agent", "The paid amount was one hundred forty two dollars and sixty cents.")]
    result = run(
        tmp_path,
        turns,
        contains=[
            "the paid amount was $142.60",
            "paid amount was $142.06",
            "paid amount was $142",
            "was $1,426",
        ],
    )
    found = [entry["found"] for entry in result["evidence"]["phraseResults"]]
    assert found == [True, False, False, False]
    assert result["evidence"]["phraseResults"][0]["method"] == "exact"
    assert result["evidence"]["phraseResults"][0]["text"].endswith("sixty cents")
    spelled = run(tmp_path, [VoiceTurn("agent", "Can I get your member I D please?")], contains=["member ID"])
    assert spelled["evidence"]["phraseResults"][0]["method"] == "exact"
    assert spelled["evidence"]["phraseResults"][0]["text"] == "member I D"


def test_number_guard_sees_digits_inside_ids(tmp_path: Path) -> None:
    turns = [VoiceTurn("agent", "I have your member ID as M12346, is that right?")]
    result = run(tmp_path, turns, contains=["member ID as M12345", "member ID as M12346"])
    assert [entry["found"] for entry in result["evidence"]["phraseResults"]] == [False, True]


def test_cannot_is_a_negation(tmp_path: Path) -> None:
    turns = [VoiceTurn("agent", "We cannot confirm the appointment today.")]
    result = run(tmp_path, turns, contains=["we can confirm the appointment today", "we can not confirm"])
    assert [entry["found"] for entry in result["evidence"]["phraseResults"]] == [False, True]


def test_negation_in_a_previous_sentence_does_not_leak(tmp_path: Path) -> None:
    turns = [VoiceTurn("agent", "That is not covered. Your copay is 25 dollars.")]
    result = run(tmp_path, turns, contains=["your copay is twenty five dollars"])
    assert phrase(result)["found"] is True


def test_not_contains_passes_when_absent_and_fails_when_said(
    tmp_path: Path, encounter: list[VoiceTurn]
) -> None:
    result = run(
        tmp_path,
        encounter,
        speaker="agent",
        not_contains=["guaranteed approval", "we're gonna give you a brace"],
    )
    absent, said = result["evidence"]["phraseResults"]
    assert (absent["kind"], absent["found"], absent["passed"]) == ("not_contains", False, True)
    assert (said["found"], said["passed"], said["turn"]) == (True, False, 56)
    assert result["score"] == 0.5


def test_empty_transcript_satisfies_not_contains_only(tmp_path: Path) -> None:
    result = run(tmp_path, [], contains=["member ID"], not_contains=["guaranteed approval"])
    assert [entry["passed"] for entry in result["evidence"]["phraseResults"]] == [False, True]
    assert result["score"] == 0.5
    assert result["status"] == "ok"


def test_no_phrases_scores_one(tmp_path: Path) -> None:
    result = run(tmp_path, [])
    assert (result["score"], result["passed"]) == (1.0, True)


def test_a_phrase_must_match_within_one_turn(tmp_path: Path, encounter: list[VoiceTurn]) -> None:
    # Turns 63 and 64: "how long do i have to wear that brace" / "you're gonna be wearing the brace…".
    result = run(tmp_path, encounter, contains=["wear that brace you're gon na be wearing"])
    assert phrase(result)["found"] is False


def test_mts_dialog_transcript(tmp_path: Path) -> None:
    turns = mts_dialogue(0)
    result = run(
        tmp_path,
        turns,
        speaker="caller",
        contains=["I've had low back pain for about 8 years now"],
        not_contains=["I have never had back pain"],
    )
    assert result["passed"] is True
    assert phrase(result)["turn"] == 1


def test_unknown_speaker_and_empty_phrase_are_unsupported(tmp_path: Path) -> None:
    bad_speaker = run(tmp_path / "a", [], speaker="nurse", contains=["hello"])
    assert bad_speaker["details"].startswith("unsupported assertion:")
    assert "speaker" in bad_speaker["details"]
    empty = run(tmp_path / "b", [], contains=["hello", " ... "])
    assert empty["details"].startswith("unsupported assertion:")
    assert "contains.1" in empty["details"]


# -- normalisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("member-ID", "member id"),
        ("twenty-five dollars", "25"),
        ("142 dollars and 60 cents", "142.6"),
        ("one hundred forty two dollars and sixty cents", "142.6"),
        ("25 dollars 5 cents, $25.05", "25.05 25.05"),
        ("20% or 20 percent", "20 percent or 20 percent"),
        ("can i get your member i d", "can i get your member id"),
        ("the N.P.I. and the I. D.", "the npi and the id"),
        ("the patient's i d", "the patient s id"),
        (
            "I'm sure you're right, she's covered and I'd call",
            "i am sure you are right she is covered and i would call",
        ),
        ("we'll see, they've paid", "we will see they have paid"),
        ("im sure you dont, its fine, whats ill", "i am sure you do not its fine what is ill"),
        ("the claim was deny'd, they'd call", "the claim was deny d they would call"),
        ("one hundred and five", "105"),
        ("two thousand five hundred and six", "2506"),
        ("nineteen hundred", "1900"),
        ("one two three", "1 2 3"),
        ("The copay is $1,250.50.", "the copay is 1250.5"),
        ("$25.00 or 0.0 or 1.2.3", "25 or 0 or 1.2.3"),
        ("I can't; isn’t it", "i can not is not it"),
        ("Cannot", "can not"),
        ("i ca n't", "i can not"),
        ("ＭＥＭＢＥＲ ID", "member id"),
        ("STRASSE Straße", "strasse strasse"),
    ],
)
def test_normalise(text: str, normalised: str) -> None:
    assert normalise(text).text == normalised


_WORDS = st.sampled_from(
    [
        "one",
        "two",
        "twenty",
        "five",
        "hundred",
        "and",
        "thousand",
        "zero",
        "no",
        "isn't",
        "ID",
        "member",
        "25",
        "$3.50",
    ]
)


@given(st.lists(st.tuples(_WORDS, st.sampled_from([" ", "-", ", ", ". ", "  "])), max_size=12))
def test_normalise_is_idempotent(pieces: list[tuple[str, str]]) -> None:
    text = "".join(word + gap for word, gap in pieces)
    once = normalise(text).text
    assert normalise(once).text == once


class _Turns:
    """The one `SandboxState` method this check reads, for fast property tests."""

    def __init__(self, turns: list[VoiceTurn]):
        self.turns = turns

    def voice_turns(self) -> list[VoiceTurn]:
        return self.turns


_ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.text(
    "one twenty hundred and thousand no n't 25 $ . , - ' x", max_size=60
)


@given(
    st.lists(st.tuples(st.sampled_from(["agent", "caller", "IVR"]), _ANY_TEXT), max_size=4),
    st.lists(_ANY_TEXT.filter(lambda text: any(char.isalnum() for char in text)), min_size=1, max_size=3),
)
def test_any_text_is_judged_without_raising(turns: list[tuple[str, str]], phrases: list[str]) -> None:
    assertion = parse_assertion({"assert": "voice-transcript", "contains": phrases, "not_contains": phrases})
    state = _Turns([VoiceTurn(speaker, text) for speaker, text in turns])
    result = voice_transcript.check(assertion, state, CheckContext())  # type: ignore[arg-type]
    assert 0 <= result.score <= 1
    for entry in result.evidence["phraseResults"]:
        assert entry["found"] == (entry["turn"] is not None)
