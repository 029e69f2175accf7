"""The voice surface's part of the task-run view (`sandboxes/viewer.py`): an event that carries
turns (`voice_turn`: turns posted, or both sides of a call) is drawn as one chat line per turn."""

from __future__ import annotations

from collections.abc import Mapping

from assay.sandboxes.viewer import ChatLine, PreviewEvent, preview_json

__all__ = ["chat_lines"]


def chat_lines(event: PreviewEvent) -> list[ChatLine]:
    if event.type != "voice_turn":
        return []
    body = preview_json(event.request)
    turns = [body] if isinstance(body, Mapping) and "text" in body else body if isinstance(body, list) else []
    return [
        ChatLine("voice turn", str(turn.get("speaker", "?")), str(turn.get("text", "")))
        for turn in turns
        if isinstance(turn, Mapping) and "text" in turn
    ]
