"""What the viewer shows, computed from stored rows: evidence as expected-vs-actual rows, the
agent's trajectory as a timeline, and which events a criterion judged. Pure functions (no I/O), so
the templates only lay out values and the tests can check them without a browser.

Evidence comes from the checks (`checks/*`) in a few shapes that share one idea: a list of
per-field (or per-phrase) results under `fieldResults`, `field_results`, `assertionResults` or
`phraseResults`, plus scalars naming what was judged (`resource`, `event_id`, `record_id`,
`row_key`, `matchedPaths`). Anything else is shown as JSON, never dropped.

What only some surfaces' events carry — a conversation drawn as chat lines, evidence that names
their events in the surface's own terms — comes from the surfaces that implement
`sandboxes.viewer.Viewer` (`registry.VIEWERS`); nothing here names a surface.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from assay.sandboxes.registry import VIEWERS
from assay.sandboxes.viewer import BODY_PREVIEW

__all__ = [
    "BODY_PREVIEW",
    "EventRow",
    "EvidenceRow",
    "TimelineItem",
    "criterion_event_links",
    "duration_text",
    "evidence_references",
    "evidence_rows",
    "matched_turns",
    "pretty",
    "timeline",
]


@dataclass(frozen=True, slots=True)
class EventRow:
    """An event as the timeline needs it: bodies as stored JSON text, cut to `BODY_PREVIEW` in SQL."""

    id: str
    sandbox_id: str
    seq: int
    type: str
    method: str | None
    path: str | None
    status: int | None
    created_at: datetime | None
    request: str | None
    response: str | None


_LOCATORS = ("path", "fhirpath", "key", "field")
"""The keys a field result names its position by: the path or expression the author wrote."""


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    field: str
    expected: str
    actual: str
    passed: bool | None
    note: str = ""


def pretty(value: Any, limit: int | None = None) -> str:
    """JSON for people: indented, non-ASCII kept; strings as they are; cut at `limit` characters."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        return text[:limit] + f"\n… ({len(text) - limit} more characters)"
    return text


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _results(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for value in evidence.values():
        rows = value if isinstance(value, list) and value else []
        if all(isinstance(item, Mapping) for item in rows) and any(
            "expected" in i or "phrase" in i for i in rows
        ):
            found.extend(rows)
    return found


def _phrase_note(item: Mapping[str, Any]) -> str:
    """How a phrase was found; for the vocabulary tier, the words it was said in and the entry;
    for a phrase not found, how many of the trade's variants were searched too."""
    method, variant = item.get("method"), item.get("vocabulary")
    if method == "vocabulary" and isinstance(variant, Mapping):
        entries = ", ".join(str(e) for e in variant.get("entries") or [])
        return f"vocabulary: as “{variant.get('variant')}” ({entries}), similarity {item.get('similarity')}"
    if method:
        return f"{method}, similarity {item.get('similarity')}"
    ruled_out = item.get("variantsRuledOut")
    if isinstance(ruled_out, list) and ruled_out:
        return f"{len(ruled_out)} variant{'s' if len(ruled_out) != 1 else ''} in the trade's words ruled out"
    return ""


def evidence_rows(evidence: Any) -> list[EvidenceRow]:
    """Expected vs actual, one row per field or phrase the check judged."""
    if not isinstance(evidence, Mapping):
        return []
    rows = []
    for item in _results(evidence):
        if "phrase" in item:
            where = f"turn {item['turn']} ({item.get('speaker')})" if item.get("turn") is not None else ""
            note = _phrase_note(item)
            rows.append(
                EvidenceRow(
                    field=str(item["phrase"]),
                    expected="said" if item.get("kind") == "contains" else "never said",
                    actual=(f"“{item['text']}” {where}".strip() if item.get("found") else "not found"),
                    passed=item.get("passed"),
                    note=note,
                )
            )
            continue
        name = next((item[key] for key in _LOCATORS if item.get(key) is not None), "?")
        operator = item.get("operator")
        rows.append(
            EvidenceRow(
                field=str(name),
                expected=(f"{operator} " if operator else "") + _scalar(item.get("expected")),
                actual=_scalar(item.get("actual")),
                passed=item.get("passed"),
                note=str(item.get("error") or ""),
            )
        )
    return rows


def evidence_references(evidence: Any) -> dict[str, str]:
    """The scalars that say what was judged (a resource, a message, a row, a file)."""
    if not isinstance(evidence, Mapping):
        return {}
    references = {}
    for key, value in evidence.items():
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            references[key] = str(value)
        elif isinstance(value, list) and value and all(isinstance(item, str) for item in value):
            references[key] = ", ".join(value)
    return references


@dataclass(frozen=True, slots=True)
class TimelineItem:
    id: str
    seq: int
    at: str
    type: str
    surface: str
    title: str
    status: int | None
    request: str
    response: str
    speaker: str | None = None
    """Set for a conversation's turns (`Viewer.chat_lines`), which the page draws as a chat."""
    text: str | None = None
    judged_by: list[str] = field(default_factory=list)
    turn: int | None = None
    """A turn's 0-based place in the transcript (as transcript evidence's `turn` counts it)."""


def with_messages(
    items: list[TimelineItem], messages: Iterable[tuple[datetime, dict[str, Any]]]
) -> list[TimelineItem]:
    """The timeline with the model's messages (`tools.trajectory.placed_messages`) among the
    events, by time; a message is a chat line `model <role>`, its tool calls named."""
    placed, leads = [], []
    for number, (when, message) in enumerate(messages):
        leads.append(bool(message.get("tool_calls")) or message.get("role") in ("system", "user"))
        content = message.get("content")
        text = (
            content
            if isinstance(content, str)
            else json.dumps(content, ensure_ascii=False)
            if content
            else ""
        )
        calls = [str((call.get("function") or {}).get("name")) for call in message.get("tool_calls") or []]
        if calls:
            text = f"{text} → {', '.join(calls)}".strip(" →") if text else f"→ {', '.join(calls)}"
        role = str(message.get("role", "?"))
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)  # as events show it
        at = when.isoformat(timespec="milliseconds")
        placed.append(
            TimelineItem(
                f"message-{number}",
                0,
                at,
                "agent_message",
                "",
                role,
                None,
                "",
                "",
                speaker=f"model {role}",
                text=text[:BODY_PREVIEW],
            )
        )
    if not placed:
        return items
    # A merge, not a sort: each list keeps its own order. Within one millisecond a message that
    # asks (or comes before any call) goes before the events, an answer after them.
    merged: list[TimelineItem] = []
    waiting = list(zip(placed, leads, strict=True))
    for item in items:
        while waiting and (waiting[0][0].at < item.at or (waiting[0][0].at == item.at and waiting[0][1])):
            merged.append(waiting.pop(0)[0])
        merged.append(item)
    merged.extend(message for message, _ in waiting)
    return merged


def _body_text(text: str | None) -> str:
    if not text or text == "null":
        return ""
    return text if len(text) < BODY_PREVIEW else text + " …"


def timeline(
    events: Iterable[EventRow], surfaces: Mapping[str, str], judged_by: Mapping[str, list[str]] | None = None
) -> list[TimelineItem]:
    """The agent's trajectory, oldest first; an event that carries a conversation (its surface's
    `Viewer.chat_lines`) becomes one chat line per turn; `judged_by` maps an event id to the
    criterion runs whose evidence names it."""
    judged_by = judged_by or {}
    turn = -1
    items = []
    for event in events:
        surface = surfaces.get(event.sandbox_id, "")
        at = event.created_at.isoformat(timespec="milliseconds") if event.created_at else ""
        viewer = VIEWERS.get(surface)
        lines = viewer.chat_lines(event) if viewer is not None else ()
        if lines:
            for line in lines:
                turn += 1
                items.append(
                    _item(event, at, surface, line.title, speaker=line.speaker, text=line.text, turn=turn)
                )
            continue
        title = " ".join(part for part in (event.method, event.path) if part) or event.type
        items.append(_item(event, at, surface, title, judged_by=judged_by.get(event.id, [])))
    return items


def _item(event: EventRow, at: str, surface: str, title: str, **shown: Any) -> TimelineItem:
    return TimelineItem(
        event.id,
        event.seq,
        at,
        event.type,
        surface,
        title,
        event.status,
        _body_text(event.request),
        _body_text(event.response),
        **shown,
    )


_QUOTED_KEYS = ("control_id", "row_key", "matchedPaths", "record_id")
"""Evidence values that name what was judged in words an event's path or bodies also carry: a
message's control id, a row key, a file's path, a record id."""


def _quotes(event: EventRow, value: str) -> bool:
    return any(value in text for text in (event.path, event.request, event.response) if text)


def criterion_event_links(criteria: Sequence[Any], events: Sequence[EventRow]) -> dict[str, list[str]]:
    """criterion run id → the ids of the events its evidence names: any event id quoted in the
    evidence, those a surface's `Viewer.judged_events` finds (the request that wrote or returned
    the matched resource), and the events whose path or bodies carry the judged message's control
    id, row key, file path or record id."""
    ids = {event.id for event in events}
    links: dict[str, list[str]] = {}
    for run in criteria:
        evidence = run.evidence if isinstance(run.evidence, Mapping) else {}
        references = evidence_references(evidence)
        found = [value for value in references.values() if value in ids]
        for viewer in VIEWERS.values():
            found += viewer.judged_events(evidence, events)
        for key in _QUOTED_KEYS:
            values = evidence.get(key)
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, str) and len(value) >= 4:
                    found += [event.id for event in events if _quotes(event, value)]
        if found:
            links[run.id] = list(dict.fromkeys(found))
    return links


def matched_turns(criteria: Sequence[Any]) -> dict[int, list[str]]:
    """Transcript turn → the phrases transcript evidence (`phraseResults`) found in it, to
    highlight them in the chat."""
    found: dict[int, list[str]] = {}
    for run in criteria:
        evidence = run.evidence if isinstance(run.evidence, Mapping) else {}
        for item in evidence.get("phraseResults") or []:
            if isinstance(item, Mapping) and item.get("found") and isinstance(item.get("turn"), int):
                found.setdefault(item["turn"], []).append(str(item.get("phrase")))
    return found


def duration_text(started: datetime | None, completed: datetime | None) -> str:
    if started is None or completed is None:
        return "—"
    seconds = (completed - started).total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"
