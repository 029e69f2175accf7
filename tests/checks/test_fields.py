"""The shared no-match listing sentences of `checks._fields` (SPEC §3.1 details)."""

from __future__ import annotations

from assay.checks._fields import candidates_listed, unparsed_listed


def test_candidates_listed_names_every_candidate_up_to_ten() -> None:
    assert candidates_listed("Transaction sets", ["271 1", "271 2"]) == "Transaction sets: 271 1; 271 2."


def test_candidates_listed_counts_the_rest_past_ten() -> None:
    targets = [f"m{i}" for i in range(12)]
    assert candidates_listed("Outbound messages", targets) == (
        "Outbound messages: m0; m1; m2; m3; m4; m5; m6; m7; m8; m9 and 2 more."
    )


def test_unparsed_listed_counts_the_rest_past_ten() -> None:
    errors = [f"response {i}: bad" for i in range(11)]
    sentence = unparsed_listed("Some stored responses do not parse", errors)
    assert sentence.startswith("Some stored responses do not parse: response 0: bad; response 1: bad;")
    assert sentence.endswith("response 9: bad; and 1 more.")


def test_unparsed_listed_short_list() -> None:
    assert unparsed_listed("Head", ["a"]) == "Head: a."
