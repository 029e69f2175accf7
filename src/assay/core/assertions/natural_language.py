"""`natural-language`: a free-text eval scored by the LLM judge (docs/assertions.md).

The legacy `evals` tool keeps any `assert` that is not a JSON assertion spec as text; it is stored
in this shape so it is a criterion like any other. With no judge configured it is recorded as
`unsupported assertion: …`, never silently failed.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from assay.core.assertions._base import TaggedAssertion

__all__ = ["NaturalLanguage"]

MAX_TEXT = 4000


def _has_words(text: str) -> str:
    if not any(char.isalnum() for char in text):
        raise ValueError("an eval text needs at least one word")
    return text


class NaturalLanguage(TaggedAssertion):
    assert_: Literal["natural-language"] = Field(alias="assert")
    text: Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_has_words)]
    """What must be true of the run, in plain words ("The agent confirmed the member's date of
    birth before giving out benefits"). Judged by the LLM judge (`ASSAY_JUDGE_URL`)."""
