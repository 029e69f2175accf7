"""The phone line a `voice` dataset defines (`data.line`): the IVR's menu graph and the
representative's switches. Validated at dataset create, keyed by path (`line.ivr.nodes.main.…`).

A dataset without `line` gets `DEFAULT_LINE`: a payer IVR in the shape real payer lines have
("press 1 for eligibility", the 10-digit NPI read back and confirmed, member ID, date of birth,
0 for a representative), a short hold with a recorded message, then the representative.
"""

from __future__ import annotations

from datetime import datetime, time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "DEFAULT_LINE",
    "Behaviour",
    "Field_",
    "Hours",
    "Ivr",
    "Line",
    "Node",
    "Option",
    "Rep",
    "line_problems",
    "parse_line",
]

Field_ = Literal["npi", "tin_last", "member_id", "birth_date", "service_date"]
Behaviour = Literal["ask_to_repeat", "mishear_digit", "transfer", "hold", "insist_fax"]
Ms = Annotated[int, Field(ge=0, le=24 * 3600 * 1000)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


DEFAULT_NUMBER = "+18005550100"
"""In the 555-01xx block kept for fiction."""


class Option(_Model):
    dtmf: Annotated[str, Field(pattern=r"^[0-9*#]$")] | None = None
    """The key that picks it."""
    say: list[Annotated[str, Field(min_length=1)]] = []
    """Words that pick it by speech (each matched whole, then fuzzily)."""
    next: str

    @model_validator(mode="after")
    def _picked_somehow(self) -> Option:
        if self.dtmf is None and not self.say:
            raise ValueError("an option needs dtmf or say")
        return self


class Node(_Model):
    type: Literal["menu", "input", "say", "transfer", "hangup"]
    prompt: Annotated[str, Field(min_length=1)]
    options: list[Option] = []
    """`menu`: what the caller may choose."""
    field: Field_ | None = None
    """`input`: what is collected."""
    digits: Annotated[int, Field(ge=1, le=20)] | None = None
    """`input` of `tin_last`: how many digits (default 4)."""
    confirm: bool = True
    """`input`: read the entry back and ask for 1 (correct) or 2 (re-enter)."""
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    """Wrong or missing answers allowed before `on_fail` (or a goodbye)."""
    on_fail: str | None = None
    next: str | None = None
    """`input` and `say`: where the call goes next."""
    queue: str | None = None
    """`transfer`: the queue's name, recorded with the transfer."""
    hold_ms: Ms = 0
    """`transfer`: time on hold before the representative answers (virtual clock)."""
    hold_messages: list[str] = []
    """`transfer`: recorded messages played in turn while on hold, one every `hold_message_every_ms`."""
    hold_message_every_ms: Annotated[int, Field(ge=1000)] = 30_000

    @model_validator(mode="after")
    def _complete(self) -> Node:
        if self.type == "menu" and not self.options:
            raise ValueError("a menu needs options")
        if self.type == "input" and self.field is None:
            raise ValueError("an input needs field")
        if self.type in ("input", "say") and self.next is None:
            raise ValueError(f"a {self.type} node needs next")
        keys = [option.dtmf for option in self.options if option.dtmf is not None]
        if len(keys) != len(set(keys)):
            raise ValueError("two options have the same dtmf key")
        return self


class Hours(_Model):
    days: list[Annotated[int, Field(ge=0, le=6)]] = [0, 1, 2, 3, 4]
    """Open days, 0 = Monday."""
    open: time = time(8, 0)
    close: time = time(18, 0)
    utc_offset_minutes: Annotated[int, Field(ge=-14 * 60, le=14 * 60)] = 0
    closed_prompt: str = "Our offices are closed. Please call back during business hours. Goodbye."


class Ivr(_Model):
    start: str
    nodes: dict[str, Node]
    hours: Hours | None = None
    """Business hours; None: always open."""

    @model_validator(mode="after")
    def _targets_exist(self) -> Ivr:
        if self.start not in self.nodes:
            raise ValueError(f"start {self.start!r} is not a node")
        for name, node in self.nodes.items():
            targets = [node.next, node.on_fail, *(option.next for option in node.options)]
            for target in targets:
                if target is not None and target not in self.nodes:
                    raise ValueError(f"node {name!r} goes to {target!r}, which is not a node")
        return self


class Rep(_Model):
    name: str = "Jordan"
    behaviours: list[Behaviour] = []
    """Switched-on difficulties: `ask_to_repeat` (the first question), `mishear_digit` (reads the
    member ID back with one digit wrong until corrected), `transfer` (to another department after
    verifying), `hold` (before the first answer), `insist_fax` (prior-auth questions go to fax)."""
    hold_ms: Ms = 60_000
    fax_number: str = "1-800-555-0199"
    providers: list[dict[str, str]] = []
    """`[{npi, name}]`: when given, the caller's NPI must be one of them, with that name."""
    llm: bool = False
    """Reword its lines through the deployment's persona model (`ASSAY_SIM_URL`) when one is set."""


class Persona(_Model):
    """A simulated caller of an inbound call (`line/caller.py` holds its rules)."""

    name: Annotated[str, Field(min_length=1)]
    reason: Annotated[str, Field(min_length=1)]
    """Why it calls: its first words after its name."""
    known: dict[str, str] = {}
    """What it can tell the agent, by item (`member_id`, `birth_date`, `name`, `phone`, any other)."""
    unknown: list[str] = []
    """Items it does not know."""
    confirm_words: list[Annotated[str, Field(min_length=1)]] = []
    """Words by which the agent confirms the change (default: approved, done, sent, scheduled, …)."""
    max_turns: Annotated[int, Field(ge=1, le=100)] = 12
    number: Annotated[str, Field(pattern=r"^\+[1-9][0-9]{6,14}$")] = "+15555550123"
    """The caller's number, shown with the ringing call."""
    llm: bool = False
    """Reword its lines through the deployment's persona model (`ASSAY_SIM_URL`); when the model
    fails, the call ends with a `fault` (the simulator's failure, not the agent's)."""


class Line(_Model):
    number: Annotated[str, Field(pattern=r"^\+[1-9][0-9]{6,14}$")] = DEFAULT_NUMBER
    """The line's phone number (E.164): what `credentials.voice.phone_number` gives and the agent
    dials; fixed by the dataset, so task instructions and a reference solution can name it."""
    ivr: Ivr | None = None
    """None: the default payer IVR."""
    rep: Rep = Rep()
    incoming: list[Persona] = []
    """Callers that ring the agent when the task run starts, one inbound call each."""
    clock_start: datetime | None = None
    """The wall time a call starts at on the virtual clock (business hours, "today" for coverage);
    None: the real time the call is placed."""

    @property
    def menu(self) -> Ivr:
        return self.ivr or DEFAULT_IVR


DEFAULT_IVR = Ivr.model_validate(
    {
        "start": "main",
        "nodes": {
            "main": {
                "type": "menu",
                "prompt": "Thank you for calling provider services. For eligibility and benefits, press 1 "
                "or say eligibility. For claim status, press 2 or say claims. For prior authorization, "
                "press 3 or say authorization. To speak with a representative, press 0 or say representative.",
                "options": [
                    {"dtmf": "1", "say": ["eligibility", "benefits"], "next": "npi"},
                    {"dtmf": "2", "say": ["claim", "claims", "claim status"], "next": "npi"},
                    {"dtmf": "3", "say": ["authorization", "prior authorization"], "next": "npi"},
                    {"dtmf": "0", "say": ["representative", "agent", "operator"], "next": "queue"},
                ],
                "on_fail": "queue",
            },
            "npi": {
                "type": "input",
                "field": "npi",
                "prompt": "Please enter or say your 10-digit National Provider Identifier.",
                "next": "member",
                "on_fail": "queue",
            },
            "member": {
                "type": "input",
                "field": "member_id",
                "prompt": "Please enter or say the member ID, followed by the pound sign.",
                "next": "dob",
                "on_fail": "queue",
            },
            "dob": {
                "type": "input",
                "field": "birth_date",
                "prompt": "Please enter the member's date of birth as two-digit month, two-digit day "
                "and four-digit year.",
                "next": "queue",
                "on_fail": "queue",
            },
            "queue": {
                "type": "transfer",
                "prompt": "Please hold while I transfer you to a representative.",
                "queue": "provider services",
                "hold_ms": 45_000,
                "hold_messages": ["Your call is important to us. Please stay on the line."],
            },
        },
    }
)
DEFAULT_LINE = Line()


def line_problems(data: Any, prefix: str = "") -> dict[str, list[str]]:
    """`{"<prefix><key.path>": [message]}` for a line definition; `{}` when it is valid."""
    if not isinstance(data, dict):
        return {prefix.rstrip(".") or "line": ["must be an object {ivr?, rep?, clock_start?}"]}
    try:
        Line.model_validate(data)
    except ValidationError as exc:
        errors: dict[str, list[str]] = {}
        for error in exc.errors(include_url=False):
            key = prefix + ".".join(str(part) for part in error["loc"])
            errors.setdefault(key.rstrip("."), []).append(str(error["msg"]).removeprefix("Value error, "))
        return errors
    return {}


def parse_line(data: Any) -> Line:
    return DEFAULT_LINE if not data else Line.model_validate(data)
