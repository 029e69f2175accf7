"""What a check may know beyond its assertion and the state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CheckContext"]


@dataclass(frozen=True, slots=True)
class CheckContext:
    input_entity: Mapping[str, Any] | None = None
    """The criterion's input entity (its `input_entity_id`), else the task's (SPEC §3.4)."""
