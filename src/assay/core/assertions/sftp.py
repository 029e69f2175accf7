"""`sftp-file-present` (docs/assertions.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from assay.core.assertions._base import FieldAssertion, MatchMode, TaggedAssertion, exactly_one

__all__ = ["SftpField", "SftpFilePresent"]


class SftpField(FieldAssertion):
    key: str | None = None
    """Metadata sidecar key: name, path, size, content_type, sha256, uploaded_at, or custom."""
    path: str | None = None
    """Dotted path into the parsed JSON content (needs `parse_json`)."""

    @model_validator(mode="after")
    def _one_locator(self) -> SftpField:
        exactly_one(self, "key", "path")
        return self


class SftpFilePresent(TaggedAssertion):
    assert_: Literal["sftp-file-present"] = Field(alias="assert")
    path: str | None = None
    """Exact path relative to the playground's SFTP root (leading `/` optional)."""
    path_pattern: str | None = None
    """Glob: `*` and `?` within one segment, `**/` zero or more segments; case-sensitive."""
    parse_json: bool = False
    fields: list[SftpField] = Field(default_factory=list)
    include_seeded: bool = False
    """Also count files seeded by datasets or scenarios that the agent never touched."""
    match: MatchMode = "any"

    @model_validator(mode="after")
    def _one_target(self) -> SftpFilePresent:
        exactly_one(self, "path", "path_pattern")
        return self
