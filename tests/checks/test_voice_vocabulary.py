"""The vocabulary tier of `voice-transcript`: phrases said in the trade's other words.

Through `verify_task` on a written snapshot (what `complete`, `rescore` and `assay verify` run),
plus the lexicon's own expansion and validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.checks._speech import normalise
from assay.checks.vocabulary import (
    BUILTIN,
    MAX_VARIANTS,
    VocabularyInvalid,
    builtin,
    lexicon_for,
    parse_entries,
)
from assay.core.state import VoiceTurn
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task


def run(tmp_path: Path, said: list[str], own: Any = None, **assertion: Any) -> dict[str, Any]:
    """One criterion on one call; `own` is the benchmark's vocabulary."""
    root = write_snapshot(tmp_path / "snapshot", voice=[VoiceTurn("agent", text) for text in said])
    spec = CriterionSpec({"assert": "voice-transcript", **assertion})
    return verify_task([spec], open_snapshot(root), vocabulary=own).as_json()["criterion_runs"][0]


def phrase(result: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return result["evidence"]["phraseResults"][index]


# -- the lexicon ---------------------------------------------------------------------------------


def test_the_builtin_lexicon_is_versioned_and_every_entry_cites_a_source() -> None:
    lexicon = builtin()
    document = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    assert (lexicon.name, lexicon.version) == (document["name"], document["version"])
    assert len(lexicon.entries) >= 150
    assert len({entry.id for entry in lexicon.entries}) == len(lexicon.entries)
    assert all(entry.source.strip() for entry in lexicon.entries)
    ids = {entry.id for entry in lexicon.entries}
    assert {"date-of-birth", "npi", "tin", "prior-authorization", "eob", "cob", "dme", "pcp"} <= ids
    assert {"cpt", "icd", "hmo", "ppo", "member-id", "in-network", "copay", "stc-30", "pos-11"} <= ids


def test_opposites_never_share_an_entry() -> None:
    lexicon = builtin()
    for a, b in [
        ("in network", "out of network"),
        ("participating", "non participating"),
        ("active coverage", "inactive coverage"),
        ("primary insurance", "secondary insurance"),
        ("claim was paid", "claim was denied"),
    ]:
        variants = {v.text for v in lexicon.variants(normalise(a))}
        assert normalise(b).text not in variants, (a, b)


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("What is your DOB?", "what is your date of birth"),
        ("date of birth", "dob"),
        ("prior authorization is required", "precertification is required"),
        ("prior auth", "prior authorization"),
        ("member ID", "subscriber id"),
        ("member ID", "policyholder id"),
        ("in network", "participating"),
        ("copay", "copayment"),
        ("NPI", "national provider identifier"),
        ("the EOB", "the explanation of benefits"),
        ("service type code 30", "health benefit plan coverage"),
        ("place of service 11", "physician office"),
        ("CPT 80053", "comprehensive metabolic panel"),
        ("the coverage terminated", "the policy ended"),
        ("the request is pended", "the request is pending clinical review"),
        ("the request was approved", "the request was certified in total"),
        ("you can appeal", "you can request a reconsideration"),
        ("you can revoke consent", "you can withdraw permission"),
        ("the patient gave verbal consent", "the patient gave oral agreement"),
        ("I will transfer you to a representative", "i will transfer you to a live agent"),
        ("I am an AI assistant", "i am an artificial intelligence assistant"),
    ],
)
def test_a_phrase_expands_to_the_trades_other_words(said: str, expected: str) -> None:
    assert expected in {v.text for v in builtin().variants(normalise(said))}


def test_expansion_keeps_the_rest_of_the_phrase_and_names_each_swap() -> None:
    variants = builtin().variants(normalise("Your copay is $25 and your DOB is on file"))
    first = next(v for v in variants if v.text == "your copayment is 25 and your dob is on file")
    assert first.entries == ("copay",) and first.replaced == (("copay", "copayment"),)
    both = next(v for v in variants if len(v.entries) == 2)
    assert both.entries == ("copay", "date-of-birth")
    assert all("25" in v.speech.all_words for v in variants)
    assert len(variants) <= MAX_VARIANTS
    assert [len(v.entries) for v in variants] == sorted(len(v.entries) for v in variants)


def test_ambiguous_and_bare_number_terms_are_read_but_never_searched_for() -> None:
    lexicon = builtin()
    # "PA" in a phrase is prior authorization; "prior authorization" is never searched as "pa".
    assert "prior authorization number" in {v.text for v in lexicon.variants(normalise("PA number"))}
    assert "pa" not in {v.text for v in lexicon.variants(normalise("prior authorization"))}
    # "835" names the remittance transaction in a phrase; "ERA" never becomes a bare "835".
    assert "era" in {v.text for v in lexicon.variants(normalise("835"))}
    assert "835" not in {v.text for v in lexicon.variants(normalise("ERA"))}
    # "take back" (also a recoupment) and "modified" (any change) are read, never searched for.
    assert "take back consent" not in {v.text for v in lexicon.variants(normalise("revoke consent"))}
    assert "modified" not in {v.text for v in lexicon.variants(normalise("partially approved"))}
    # "authorized" beside "authorization" would say the phrase's own word back to it.
    approved = {v.text for v in lexicon.variants(normalise("the authorization was approved"))}
    assert (
        "the authorization was authorized" not in approved and "the authorization was certified" in approved
    )
    entries = parse_entries([{"terms": ["Sunrise plan", "270"], "source": "handbook"}])
    assert entries[0].terms == ("Sunrise plan",) and entries[0].ambiguous == ("270",)


# -- the tier, through verify_task ---------------------------------------------------------------


def test_a_variant_is_found_and_the_evidence_says_which_one_and_from_which_entry(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        ["Thanks. Can I get the patient's DOB and the subscriber ID?"],
        contains=["date of birth", "member ID"],
    )
    assert result["passed"] is True
    dob, member = phrase(result, 0), phrase(result, 1)
    assert dob["method"] == "vocabulary" and dob["text"] == "DOB"
    assert dob["vocabulary"] == {
        "variant": "dob",
        "entries": ["date-of-birth"],
        "replaced": [{"term": "date of birth", "by": "dob"}],
        "tier": "exact",
    }
    assert member["vocabulary"]["entries"] == ["member-id"] and member["text"] == "subscriber ID"
    lexicon = result["evidence"]["vocabulary"]
    assert lexicon == {"name": "healthcare-admin", "version": builtin().version, "benchmarkEntries": 0}
    assert result["evidence"]["tiers"] == ["exact", "fuzzy", "vocabulary"]


def test_a_phrase_is_found_with_several_of_its_terms_swapped_at_once(tmp_path: Path) -> None:
    result = run(
        tmp_path, ["I can confirm the member has active coverage with us."], contains=["patient is eligible"]
    )
    found = phrase(result)
    assert found["found"] is True and found["text"] == "member has active coverage"
    assert found["vocabulary"]["entries"] == ["member", "eb-1"]
    assert found["vocabulary"]["tier"] == "exact"


def test_the_vocabulary_follows_the_criterions_own_tiers(tmp_path: Path) -> None:
    result = run(tmp_path, ["Can I get the DOB?"], contains=["date of birth"], tiers=["exact"])
    assert result["passed"] is True and result["evidence"]["tiers"] == ["exact", "vocabulary"]


def test_the_phrase_itself_wins_over_a_variant(tmp_path: Path) -> None:
    result = run(tmp_path, ["DOB first.", "Now the date of birth, please."], contains=["date of birth"])
    assert phrase(result)["method"] == "exact" and phrase(result)["turn"] == 1
    assert "vocabulary" not in phrase(result)


def test_a_criterion_can_switch_the_vocabulary_off(tmp_path: Path) -> None:
    result = run(tmp_path, ["Can I get the DOB?"], contains=["date of birth"], vocabulary=False)
    assert result["passed"] is False
    assert "vocabulary" not in result["evidence"] and "variantsRuledOut" not in phrase(result)
    assert result["evidence"]["tiers"] == ["exact", "fuzzy"]


@pytest.mark.parametrize(
    ("wanted", "said"),
    [
        ("prior authorization is required", "No precertification is required for that visit."),
        ("prior authorization is required", "A precert is not required for that visit."),
        ("the provider is in network", "Dr. Lee is a non-participating provider."),
        ("in network", "She is not participating with the plan."),
        ("the claim was denied", "I can't say the claim has been denied yet."),
        ("active coverage", "The policy is not active."),
    ],
)
def test_no_variant_flips_a_negation(tmp_path: Path, wanted: str, said: str) -> None:
    result = run(tmp_path, [said], contains=[wanted])
    assert result["passed"] is False, phrase(result)


def test_the_number_guard_holds_for_every_variant(tmp_path: Path) -> None:
    assert (
        run(tmp_path, ["Your copayment is 250 dollars."], contains=["copay is 25 dollars"])["passed"] is False
    )
    found = run(tmp_path, ["Your copayment is 25 dollars."], contains=["copay is 25 dollars"])
    assert found["passed"] is True and phrase(found)["text"] == "copayment is 25 dollars"
    assert run(tmp_path, ["Service type 3 was returned."], contains=["service type 30"])["passed"] is False
    assert run(tmp_path, ["That is place of service 12."], contains=["office setting"])["passed"] is False
    # "835" is never searched for, so an amount of 835 is not an ERA.
    assert run(tmp_path, ["The balance is 835 dollars."], contains=["ERA"])["passed"] is False


def test_not_contains_names_the_variant_it_found(tmp_path: Path) -> None:
    result = run(tmp_path, ["I'll need the social security number to look you up."], not_contains=["SSN"])
    assert result["passed"] is False
    found = phrase(result)
    assert found["found"] is True and found["method"] == "vocabulary"
    assert found["vocabulary"]["variant"] == "social security number"
    assert found["vocabulary"]["entries"] == ["ssn"]


def test_not_contains_passing_lists_every_variant_it_ruled_out(tmp_path: Path) -> None:
    result = run(tmp_path, ["I can look you up by name and birthday."], not_contains=["SSN"])
    assert result["passed"] is True
    ruled_out = phrase(result)["variantsRuledOut"]
    assert [v["variant"] for v in ruled_out] == ["social security number"]
    assert ruled_out[0]["entries"] == ["ssn"]
    negated = run(tmp_path, ["We do not need a social security number."], not_contains=["SSN"])
    assert negated["passed"] is True  # a negated mention is not saying it (SPEC §3.6 guard)
    assert phrase(negated)["variantsRuledOut"][0]["variant"] == "social security number"


def test_the_speaker_filter_applies_to_variants(tmp_path: Path) -> None:
    root = write_snapshot(
        tmp_path / "snapshot",
        voice=[VoiceTurn("caller", "My DOB is March 3rd."), VoiceTurn("agent", "Thank you.")],
    )
    spec = CriterionSpec({"assert": "voice-transcript", "speaker": "agent", "contains": ["date of birth"]})
    result = verify_task([spec], open_snapshot(root)).as_json()["criterion_runs"][0]
    assert result["passed"] is False


def test_a_benchmarks_vocabulary_extends_the_builtin_one(tmp_path: Path) -> None:
    own = [{"id": "sunrise", "terms": ["Sunrise Health Plan", "SHP"], "source": "Sunrise member handbook"}]
    said = ["Thank you for calling SHP member services."]
    assert run(tmp_path, said, contains=["Sunrise Health Plan"])["passed"] is False
    result = run(tmp_path, said, own, contains=["Sunrise Health Plan", "member ID"])
    found = phrase(result)
    assert found["passed"] is True and found["vocabulary"]["entries"] == ["sunrise"]
    assert result["evidence"]["vocabulary"]["benchmarkEntries"] == 1


def test_a_bad_benchmark_vocabulary_is_an_error_not_a_quiet_skip(tmp_path: Path) -> None:
    bad = [{"terms": ["a"]}]
    result = run(tmp_path, ["hello"], bad, contains=["hello"])
    assert result["status"] == "error"
    assert "vocabulary" in result["details"] and "vocabulary.0." in result["details"]
    switched_off = run(tmp_path, ["hello"], bad, contains=["hello"], vocabulary=False)
    assert switched_off["passed"] is True


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"vocabulary": "DOB"}, "vocabulary"),
        ([{"terms": ["DOB", "date of birth"]}], "vocabulary.0.source"),
        ([{"terms": ["DOB"], "source": "x"}], "vocabulary.0.terms"),
        ([{"terms": ["not covered", "excluded"], "source": "x"}], "vocabulary.0.terms.0"),
        ([{"terms": ["a", "?!"], "source": "x"}], "vocabulary.0.terms.1"),
        ([{"terms": ["a", 5], "source": "x"}], "vocabulary.0.terms.1"),
        ([{"terms": ["a", "b"], "source": "x", "colour": "red"}], "vocabulary.0.colour"),
        (
            [
                {"id": "x", "terms": ["a", "b"], "source": "x"},
                {"id": "x", "terms": ["c", "d"], "source": "y"},
            ],
            "vocabulary.1.id",
        ),
    ],
)
def test_a_vocabulary_is_validated_key_by_key(raw: Any, key: str) -> None:
    with pytest.raises(VocabularyInvalid) as caught:
        parse_entries(raw)
    assert key in caught.value.problems


def test_lexicon_for_is_the_builtin_one_without_a_benchmark_vocabulary() -> None:
    assert lexicon_for(None) is builtin() and lexicon_for([]) is builtin()
    own = [{"terms": ["SHP", "Sunrise Health Plan"], "source": "handbook"}]
    assert lexicon_for(own) is lexicon_for([dict(own[0])])
    assert len(lexicon_for(own).entries) == len(builtin().entries) + 1


def _pairs() -> list[tuple[str, str]]:
    """(a phrase, another searchable term of its entry) for every built-in entry."""
    return [(entry.terms[0], term) for entry in builtin().entries for term in entry.terms[1:]]


def test_every_builtin_term_is_found_for_its_entrys_phrase_and_never_when_negated() -> None:
    from assay.checks.voice_transcript import ExactMatcher, FuzzyMatcher, find_phrase

    tiers = [ExactMatcher(), FuzzyMatcher()]

    def found(wanted: str, said: str) -> bool:
        return bool(
            find_phrase(wanted, "contains", [(0, "agent", normalise(said))], tiers, builtin())["found"]
        )

    pairs = _pairs()
    assert len(pairs) >= 500
    missed = [(a, t) for a, t in pairs if not found(a, f"Okay, {t} is on file.")]
    assert missed == []
    # "non" in a term is itself the negation the guard compares, so those entries say it twice.
    flipped = [(a, t) for a, t in pairs if "non" not in f"{a} {t}".casefold() and found(a, f"Okay, no {t}.")]
    assert flipped == []
