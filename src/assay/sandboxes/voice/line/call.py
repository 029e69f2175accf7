"""One call on the phone line, as a pure state machine: the IVR walks its menu graph, then the
representative (`rep.py`) takes over. No SQL, no HTTP, no real clock: the caller of `step`
passes the call's JSON state, the agent's action and how long the agent took to act; it gets
back what was said (both sides, with times on the call's virtual clock) and the new state.

The virtual clock: the line speaks at `MS_PER_WORD` per word; the agent's turn starts when the
line stopped speaking plus the agent's measured response time (its latency) and lasts as long
as its words do; the line answers `LINE_GAP_MS` after the agent stops. Holds advance the clock
by their length, with the recorded messages placed inside it — nothing sleeps.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from rapidfuzz import fuzz

from assay.sandboxes.payer import PayerDefinition
from assay.sandboxes.voice.line import caller, rep
from assay.sandboxes.voice.line.config import Ivr, Line, Node
from assay.sandboxes.voice.line.spoken import (
    as_digits,
    digit_runs,
    npi_valid,
    read_date,
    says_no,
    says_yes,
    spell_digits,
)

__all__ = [
    "LINE_GAP_MS",
    "MS_PER_WORD",
    "Facts",
    "Said",
    "Turn",
    "begin",
    "reference_number",
    "ringing",
    "step",
]

MS_PER_WORD = 350
"""About 170 words a minute, a recorded prompt's pace."""
LINE_GAP_MS = 400
"""How long the line waits after the agent stops before it speaks."""
DTMF_MS = 200
"""One key press and the gap after it."""
FUZZY_OPTION = 85.0
"""`partial_ratio` a spoken menu choice needs against an option's word (a mumbled "eligibilty")."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What the line knows about the payer: the definition the X12 clearinghouse and the portal
    answer from, and the portal's prior-authorization requests."""

    payer: PayerDefinition
    prior_auths: Sequence[dict[str, Any]] = ()
    restyle: Callable[[str, str], str] | None = None
    """The persona model's rewording, (role, words) → words, when the deployment has one."""


@dataclass(slots=True)
class Said:
    speaker: str
    text: str
    kind: str = "speech"
    start_ms: int = 0
    end_ms: int = 0

    def json(self) -> dict[str, Any]:
        return {
            "speaker": self.speaker,
            "text": self.text,
            "kind": self.kind,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
        }


@dataclass(slots=True)
class Turn:
    """One step's work: the state being changed and everything said, in order."""

    state: dict[str, Any]
    line: Line
    facts: Facts
    said: list[Said] = field(default_factory=list)

    @property
    def clock(self) -> int:
        return int(self.state["clock_ms"])

    def speak(self, speaker: str, text: str, kind: str = "speech") -> None:
        if kind == "speech" and self.facts.restyle is not None:
            text = self._voiced(speaker, text)
        start = self.clock
        duration = MS_PER_WORD * max(1, len(text.split())) if kind == "speech" else 0
        self.said.append(Said(speaker, text, kind, start, start + duration))
        self.state["clock_ms"] = start + duration
        if kind == "speech":
            self.state["line_start_ms"], self.state["line_end_ms"] = start, start + duration

    def wait(self, ms: int) -> None:
        self.state["clock_ms"] = self.clock + ms

    def _voiced(self, speaker: str, text: str) -> str:
        """The persona model's words when the line asks for them and they keep every fact."""
        assert self.facts.restyle is not None
        if speaker == "rep" and self.line.rep.llm:
            try:
                worded = self.facts.restyle("rep", text)
            except Exception:
                return text
            return worded if same_facts(text, worded) else text
        if speaker == "caller" and (self.state.get("persona") or {}).get("llm"):
            worded = self.facts.restyle("caller", text)  # a failure is the simulator's fault
            return worded if same_facts(text, worded) else text
        return text

    def hold(self, speaker: str, hold_ms: int, messages: Sequence[str], every_ms: int = 30_000) -> None:
        """Put the caller on hold for `hold_ms` of virtual time, the recorded messages in turn."""
        if hold_ms <= 0:
            return
        self.speak(speaker, f"on hold for {hold_ms} ms", "hold")
        ends = self.clock + hold_ms
        index = 0
        while messages and self.clock + every_ms < ends:
            self.wait(every_ms)
            self.speak(speaker, messages[index % len(messages)])
            index += 1
        self.state["clock_ms"] = max(self.clock, ends)

    def end(self, reason: str) -> None:
        self.speak("rep" if self.state.get("phase") == "rep" else "ivr", reason, "hangup")
        self.state["phase"] = "ended"
        self.state["end_reason"] = reason

    def today(self) -> date:
        started = datetime.fromisoformat(self.state["started_at"])
        return (started + timedelta(milliseconds=self.clock)).date()


_FACT = re.compile(r"[\w$]*\d[\w$.,/:-]*")


def _facts_in(text: str) -> set[str]:
    return {token.rstrip(".,:;").replace(",", "") for token in _FACT.findall(text)}


def same_facts(said: str, worded: str) -> bool:
    """The rewording keeps every number, amount, date and identifier and adds none."""
    return bool(worded.strip()) and _facts_in(said) == _facts_in(worded)


def reference_number(call_id: str) -> str:
    """The call's reference number: `REF` and eight characters a listener cannot confuse."""
    alphabet = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
    digest = hashlib.sha256(call_id.encode()).digest()
    return "REF" + "".join(alphabet[byte % len(alphabet)] for byte in digest[:8])


def begin(line: Line, facts: Facts, call_id: str, started_at: datetime) -> tuple[dict[str, Any], list[Said]]:
    """A new call's state and the line's first words (the greeting, or the closed message)."""
    state: dict[str, Any] = {
        "call_id": call_id,
        "phase": "ivr",
        "clock_ms": 0,
        "line_end_ms": 0,
        "started_at": (line.clock_start or started_at).isoformat(),
        "node": line.menu.start,
        "tries": 0,
        "entry": None,
        "collected": {},
        "dtmf_path": [],
        "rep": {},
    }
    turn = Turn(state, line, facts)
    hours = line.menu.hours
    if hours is not None and not _open(hours, datetime.fromisoformat(state["started_at"])):
        turn.speak("ivr", hours.closed_prompt)
        turn.end("closed")
        return state, turn.said
    _enter(turn, line.menu.start)
    return state, turn.said


def ringing(persona: dict[str, Any], call_id: str, started_at: datetime) -> dict[str, Any]:
    """The state of an inbound call that rings until the agent answers it."""
    return {
        "call_id": call_id,
        "phase": "ringing",
        "clock_ms": 0,
        "line_end_ms": 0,
        "started_at": started_at.isoformat(),
        "persona": persona,
    }


def _open(hours: Any, at: datetime) -> bool:
    local = at + timedelta(minutes=hours.utc_offset_minutes)
    return local.weekday() in hours.days and hours.open <= local.time().replace(tzinfo=None) < hours.close


def step(
    line: Line,
    facts: Facts,
    state: dict[str, Any],
    action: str,
    value: str,
    latency_ms: int,
    *,
    barge_in: bool = False,
) -> list[Said]:
    """Apply one agent action (`say` text, `dtmf` digits, `hangup`) to `state` (changed in place);
    what was said, the agent's own turn first.

    `barge_in`: the agent started while the line's last words were still playing (a real-time
    agent knows); its turn then starts `latency_ms` after those words began, and the line stops
    there, as payer IVRs let callers barge in."""
    turn = Turn(state, line, facts)
    if action == "answer":
        _simulated(turn, caller.answer_call)
        return turn.said
    latency = max(0, latency_ms)
    start = int(state.get("line_end_ms", 0)) + latency
    if barge_in:
        start = min(start, int(state.get("line_start_ms", 0)) + latency)
        state["clock_ms"] = start
    else:
        state["clock_ms"] = max(turn.clock, start)
    if action == "hangup":
        turn.said.append(Said("agent", "caller hung up", "hangup", turn.clock, turn.clock))
        state["phase"], state["end_reason"] = "ended", "agent hung up"
        return turn.said
    if action == "dtmf":
        duration = DTMF_MS * len(value)
        turn.said.append(Said("agent", value, "dtmf", turn.clock, turn.clock + duration))
        turn.wait(duration + LINE_GAP_MS)
        if state["phase"] == "ivr":
            _keys(turn, value)
        elif state["phase"] == "rep":
            rep.respond(turn, "", keyed=value)
        return turn.said
    duration = MS_PER_WORD * max(1, len(value.split()))
    turn.said.append(Said("agent", value, "speech", turn.clock, turn.clock + duration))
    turn.wait(duration + LINE_GAP_MS)
    if state["phase"] == "ivr":
        _spoken(turn, value)
    elif state["phase"] == "caller":
        _simulated(turn, lambda t: caller.reply(t, value))
    else:
        rep.respond(turn, value)
    return turn.said


def _simulated(turn: Turn, act: Any) -> None:
    """Run the simulated caller; its own failure ends the call as a `fault`, never the agent's."""
    try:
        act(turn)
    except Exception as exc:
        turn.speak("caller", f"simulator fault: {type(exc).__name__}: {exc}"[:500], "fault")
        turn.state["phase"] = "ended"
        turn.state["end_reason"] = "simulator fault"


# --- the IVR -------------------------------------------------------------------------------


def _node(turn: Turn) -> Node:
    return turn.line.menu.nodes[turn.state["node"]]


def _enter(turn: Turn, name: str) -> None:
    """Go to a node and play it; `say` nodes chain on, `transfer` ends in the representative."""
    ivr: Ivr = turn.line.menu
    for _ in range(len(ivr.nodes) + 1):  # a cycle of `say` nodes must not spin forever
        node = ivr.nodes[name]
        turn.state.update(node=name, tries=0, entry=None)
        if node.type == "say":
            turn.speak("ivr", node.prompt)
            name = node.next or name
            continue
        if node.type == "hangup":
            turn.speak("ivr", node.prompt)
            turn.end("the IVR ended the call")
            return
        if node.type == "transfer":
            turn.speak("ivr", node.prompt)
            _transfer(turn, node)
            return
        turn.speak("ivr", node.prompt)
        return
    turn.end("the IVR has no way on")


def _transfer(turn: Turn, node: Node) -> None:
    turn.speak("ivr", node.queue or "representative", "transfer")
    turn.hold("ivr", node.hold_ms, node.hold_messages, node.hold_message_every_ms)
    turn.state["phase"] = "rep"
    rep.greet(turn)


def _retry(turn: Turn, node: Node) -> None:
    """ "I didn't get that": the prompt again, or `on_fail` once the retries are spent."""
    turn.state["tries"] = int(turn.state["tries"]) + 1
    turn.state["entry"] = None
    if turn.state["tries"] > node.retries:
        if node.on_fail is not None:
            _enter(turn, node.on_fail)
        else:
            turn.speak("ivr", "We are unable to process your request. Goodbye.")
            turn.end("the IVR gave up")
        return
    turn.speak("ivr", f"I'm sorry, I didn't get that. {node.prompt}")


def _keys(turn: Turn, digits: str) -> None:
    """Key presses, consumed node by node (a caller who knows the menu may type ahead)."""
    rest = digits
    while rest and turn.state["phase"] == "ivr":
        node = _node(turn)
        if node.type == "menu":
            key, rest = rest[0], rest[1:]
            turn.state["dtmf_path"].append(key)
            option = next((o for o in node.options if o.dtmf == key), None)
            if option is None:
                _retry(turn, node)
                continue
            _enter(turn, option.next)
        elif node.type == "input":
            if turn.state["entry"] is not None:  # the read-back's question: 1 correct, 2 re-enter
                key, rest = rest[0], rest[1:]
                _confirm(turn, node, key == "1", key == "2")
                continue
            size = _fixed_size(node)
            if "#" in rest:
                entry, _, rest = rest.partition("#")
            elif size is not None:
                entry, rest = rest[:size], rest[size:]
            else:
                entry, rest = rest, ""
            _entered(turn, node, entry, keyed=True)
        else:
            return


def _fixed_size(node: Node) -> int | None:
    return {"npi": 10, "birth_date": 8, "service_date": 8, "tin_last": node.digits or 4}.get(node.field or "")


def _spoken(turn: Turn, text: str) -> None:
    node = _node(turn)
    if node.type == "menu":
        option = _spoken_option(node, text)
        if option is None:
            _retry(turn, node)
        else:
            if option.dtmf is not None:
                turn.state["dtmf_path"].append(f"say:{option.dtmf}")
            _enter(turn, option.next)
    elif node.type == "input":
        if turn.state["entry"] is not None:
            _confirm(turn, node, says_yes(text), says_no(text))
        else:
            _entered(turn, node, text, keyed=False)


def _spoken_option(node: Node, text: str) -> Any:
    heard = " ".join(as_digits(text).lower().split())
    words = f" {heard} "
    for option in node.options:  # a spoken key ("one", "press 1") picks like the key
        if (
            option.dtmf is not None
            and option.dtmf.isdigit()
            and heard in (option.dtmf, f"press {option.dtmf}")
        ):
            return option
    for option in node.options:
        if any(f" {word.lower()} " in words for word in option.say):
            return option
    scored = [
        (max(fuzz.partial_ratio(word.lower(), heard) for word in option.say), option)
        for option in node.options
        if option.say
    ]
    best = max(scored, key=lambda pair: pair[0], default=None)
    return best[1] if best is not None and best[0] >= FUZZY_OPTION else None


def _entered(turn: Turn, node: Node, raw: str, *, keyed: bool) -> None:
    value = _valid(node, raw, keyed=keyed)
    if value is None:
        _retry(turn, node)
        return
    if not node.confirm:
        _accept(turn, node, value)
        return
    turn.state["entry"] = value
    shown = value if node.field in ("birth_date", "service_date") else spell_digits(value)
    turn.speak("ivr", f"You entered {shown}. If this is correct, press 1. To re-enter, press 2.")


def _confirm(turn: Turn, node: Node, yes: bool, no: bool) -> None:
    if yes:
        _accept(turn, node, str(turn.state["entry"]))
    elif no:
        turn.state["entry"] = None
        turn.speak("ivr", node.prompt)
    else:
        turn.speak("ivr", "I'm sorry, I didn't get that. If this is correct, press 1. To re-enter, press 2.")


def _accept(turn: Turn, node: Node, value: str) -> None:
    turn.state["collected"][node.field or ""] = value
    _enter(turn, node.next or turn.state["node"])


def _valid(node: Node, raw: str, *, keyed: bool) -> str | None:
    """The entry in its stored form, or None when it is not one (too short, bad check digit)."""
    kind = node.field
    if kind in ("birth_date", "service_date"):
        when, _ = read_date(raw, keyed=keyed)
        if when is None and not keyed:
            when, _ = read_date(raw, keyed=True)
        return when.isoformat() if when is not None else None
    if kind == "member_id":
        if keyed:
            return raw if raw.isdigit() and 2 <= len(raw) <= 20 else None
        return _spoken_identifier(raw)
    runs = [raw] if keyed else digit_runs(raw)
    digits = "".join(runs) if keyed else max(runs, key=len, default="")
    if kind == "npi":
        return digits if npi_valid(digits) else None
    wanted = node.digits or 4
    return digits if len(digits) == wanted and digits.isdigit() else None


def _spoken_identifier(text: str) -> str | None:
    """A spoken member ID: its letters and digits run together (`W 1 2 3` → `W123`); words such as
    "it is" and "the member ID is" are dropped."""
    tokens = as_digits(text).replace("-", " ").split()
    kept = [t for t in tokens if any(c.isdigit() for c in t) or (len(t) == 1 and t.isalpha())]
    value = "".join(kept).upper()
    return value if 2 <= len(value) <= 20 and value.isalnum() else None
