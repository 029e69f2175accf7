"""The optional `Viewer` protocol: a surface's part of the task-run view (`service/ui/views.py`).

The viewer draws every event as a request with its answer, and links a criterion to the events
its evidence quotes. A surface whose events say more than that opts in by implementing `Viewer`
(the registry indexes it as `VIEWERS`): the conversation an event carries, drawn as chat lines
(the phone line's turns), and the events a criterion's evidence names in the surface's own terms
(the FHIR request that wrote or returned the judged resource).

The viewer hands over each event as stored for the page (`PreviewEvent`): bodies as JSON text,
cut to `BODY_PREVIEW` characters; `preview_json` reads one back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["BODY_PREVIEW", "ChatLine", "PreviewEvent", "Viewer", "preview_json"]

BODY_PREVIEW = 1000
"""Characters of a request or response body shown inline (as stored, not re-indented: a page of
2,000 events must render in well under 300 ms); the event page shows all of it, pretty-printed."""


class PreviewEvent(Protocol):
    """One sandbox event as the viewer reads it (docs/api.md: the event log)."""

    @property
    def id(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def path(self) -> str | None: ...

    @property
    def request(self) -> str | None: ...

    @property
    def response(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ChatLine:
    """One turn of a conversation an event carries: drawn as a chat line, numbered in transcript
    order (as transcript evidence's `turn` counts)."""

    title: str
    speaker: str
    text: str


@runtime_checkable
class Viewer(Protocol):
    def chat_lines(self, event: PreviewEvent) -> Sequence[ChatLine]:
        """The turns `event` (one of this surface's) carries, in order; empty: draw it as a request."""
        ...

    def judged_events(self, evidence: Mapping[str, Any], events: Sequence[PreviewEvent]) -> Iterable[str]:
        """The ids of the events among `events` (all of the task run's, of every surface) that a
        criterion's `evidence` names in this surface's terms, beyond quoting an event id."""
        ...


def preview_json(text: str | None) -> Any:
    """A stored body as JSON, or None when absent, cut short by the preview, or not JSON."""
    if not text or len(text) >= BODY_PREVIEW:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
