"""The simulated caller of an inbound call: a persona from the `voice` dataset, deterministic.

A persona is what τ²-bench's user scenarios hold — why it calls, what it knows, what it does not:
`{name, reason, known: {<item>: <value>}, unknown: [<item>], confirm_words?, max_turns?}`. Its
rules, in the order they are tried on each thing the agent says:

1. The agent confirms the change (a `confirm_words` word, not negated): the caller thanks it and
   ends the call — signal `stop`.
2. The agent transfers the call ("transfer", "connect you"): the caller agrees and the call ends —
   signal `transfer`.
3. The agent says it cannot help ("can't help", "unable to help", "not something we"): the caller
   ends the call — signal `out_of_scope`.
4. The agent says goodbye before confirming: the caller does not hang up; it asks whether its
   request is done (the caller waits for the confirmation, never ends early).
5. The agent asks for things: each known item asked for is given (items are found by their words,
   `member_id` by "member id" or "member number", `birth_date` by "date of birth", "dob" or
   "birthday"); an unknown one gets "I'm sorry, I don't know that".
6. Anything else: the caller restates its reason.

After `max_turns` (default 12) agent turns without an ending, the caller gives up and hangs up —
signal `gave_up`. Each ending is a `signal` event on the transcript. An exception inside the
simulator is not the agent's doing: the call records a `fault` event and ends, and `voice-call`
reports the criterion `error`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.sandboxes.voice.line.call import Turn

__all__ = ["SYNONYMS", "answer_call", "reply"]

SYNONYMS: dict[str, tuple[str, ...]] = {
    "member_id": ("member id", "member number", "id number", "insurance id"),
    "birth_date": ("date of birth", "dob", "birthday", "born"),
    "name": ("your name", "full name", "who am i speaking", "who is calling", "name"),
    "phone": ("phone", "callback number", "call you back"),
}
_CONFIRM = ("approved", "done", "sent", "scheduled", "rescheduled", "confirmed", "all set", "submitted")
_NEGATION = re.compile(r"\b(not|no|n't|never|cannot)\b")


def _items(persona: dict[str, Any], key: str) -> Any:
    return persona.get(key) or ({} if key == "known" else [])


def answer_call(turn: Turn) -> None:
    """The caller speaks first: who it is and why it calls."""
    persona = turn.state["persona"]
    turn.state["phase"] = "caller"
    turn.state["caller_turns"] = 0
    turn.speak("caller", f"Hi, this is {persona['name']}. {persona['reason']}")


def _asked(text: str, item: str) -> bool:
    words = SYNONYMS.get(item, (item.replace("_", " "),))
    return any(re.search(rf"\b{re.escape(word)}\b", text) for word in words)


def _end(turn: Turn, said: str, signal: str) -> None:
    turn.speak("caller", said)
    turn.speak("caller", signal, "signal")
    turn.state["phase"] = "ended"
    turn.state["end_reason"] = f"caller: {signal}"


def reply(turn: Turn, text: str) -> None:
    """The caller's answer to one thing the agent said (the rules above, in order)."""
    persona, lowered = turn.state["persona"], text.lower()
    turn.state["caller_turns"] = int(turn.state.get("caller_turns", 0)) + 1
    confirmed = any(word in lowered for word in persona.get("confirm_words") or _CONFIRM)
    if confirmed and not _NEGATION.search(lowered):
        _end(turn, "Great, thank you so much. Goodbye.", "stop")
        return
    if "transfer" in lowered or "connect you" in lowered:
        _end(turn, "Okay, sure. Thanks.", "transfer")
        return
    if any(p in lowered for p in ("can't help", "cannot help", "unable to help", "not something we")):
        _end(turn, "Oh, okay. I'll try somewhere else. Bye.", "out_of_scope")
        return
    if "goodbye" in lowered or re.search(r"\bbye\b", lowered):
        turn.speak("caller", "Wait, before you go — is my request taken care of?")
        return
    answers = [
        f"My {item.replace('_', ' ')} is {value}."
        for item, value in _items(persona, "known").items()
        if _asked(lowered, item)
    ]
    unknown = [item for item in _items(persona, "unknown") if _asked(lowered, item)]
    if unknown:
        answers.append(f"I'm sorry, I don't know my {unknown[0].replace('_', ' ')}.")
    if answers:
        turn.speak("caller", " ".join(answers))
    elif turn.state["caller_turns"] >= int(persona.get("max_turns") or 12):
        _end(turn, "I'm sorry, I have to go. I'll call back later.", "gave_up")
    else:
        turn.speak("caller", f"{persona['reason']} Can you help me with that?")
