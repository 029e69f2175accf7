"""The representative: a deterministic dialogue manager in charge of facts and state.

It greets, verifies the caller — the provider's NPI (a valid check digit; with the line's
`providers` list, one of them under that name) and name, the member's ID and date of birth, as
`find_member` matches them for the 271 and the portal — and refuses to disclose anything about
the member until all four are verified (a `refused` event each time it is asked too early).
Verified, it answers from the payer definition the X12 clearinghouse and the portal answer from:
eligibility and plan dates, copay, deductible met and remaining, coinsurance, network status,
prior-authorization status (the portal's requests, by auth number or procedure code), claim
status. What it cannot answer gets a scripted fallback. It gives the call reference number when
asked or when the caller closes, and then hangs up on a goodbye.

What the IVR already collected (NPI, member ID, date of birth) counts as given.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from assay.sandboxes.payer import Benefit, Claim, Member, find_member, identifiers_equal
from assay.sandboxes.voice.line.spoken import digit_runs, npi_valid, read_date, says_no, spell_digits

if TYPE_CHECKING:
    from assay.sandboxes.voice.line.call import Turn

__all__ = ["greet", "respond"]

_INTENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("prior_auth", ("prior auth", "authorization", "authorisation", "auth number", "pre-cert", "precert")),
    ("claim", ("claim",)),
    ("copay", ("copay", "co-pay", "copayment")),
    ("deductible", ("deductible",)),
    ("coinsurance", ("coinsurance", "co-insurance")),
    ("network", ("network",)),
    ("eligibility", ("eligib", "active", "coverage", "covered", "effective", "plan date", "termination")),
)
_DISCLOSING = frozenset(name for name, _ in _INTENTS)
_SERVICE_WORDS = (
    ("office visit", "98"), ("specialist", "98"), ("urgent care", "UC"), ("emergency", "86"),
    ("hospital", "48"), ("physical therapy", "PT"), ("mental health", "MH"), ("chiropractic", "33"),
)  # fmt: skip
_CLOSING = ("that's all", "that is all", "nothing else", "goodbye", "bye")
_NAME = re.compile(
    r"\b(?:my name is|name is|this is|i am|i'm)\s+((?:dr\.?\s+)?[a-z][a-z.'-]*(?:\s+[a-z][a-z.'-]*){0,2}?)"
    r"(?=\s+(?:from|with|at|calling|and|my|the|npi)\b|[,.;]|$)",
    re.IGNORECASE,
)
_AUTH = re.compile(r"\bAUTH(?=[A-Z]*[0-9])[0-9A-Z]{4,}\b")
"""An auth number (`AUTH` and letters with at least one digit), not the word AUTHORIZATION."""
_PROCEDURE = re.compile(r"\b(?:[0-9]{5}|[A-Z][0-9]{4})\b")
_STATUS = {
    "A0": "acknowledged and forwarded", "A1": "received and acknowledged", "A2": "accepted into adjudication",
    "A3": "returned as unprocessable", "A4": "not found", "P0": "pending", "P1": "pending in process",
    "P2": "pending review", "P3": "pending information requested", "P4": "pending at the payer",
    "F0": "finalized", "F1": "finalized and paid", "F2": "finalized and denied", "F3": "finalized and revised",
    "F4": "finalized, adjudication complete with no payment", "R0": "requests for information",
}  # fmt: skip


def _rep(turn: Turn) -> dict[str, Any]:
    state: dict[str, Any] = turn.state.setdefault("rep", {})
    return state


def greet(turn: Turn) -> None:
    """The pick-up: who answers, and what it still needs to verify the caller."""
    rep = _rep(turn)
    collected = turn.state.get("collected") or {}
    for key in ("npi", "member_id", "birth_date"):
        if collected.get(key) and not rep.get(key):
            rep[key] = collected[key]
    payer = turn.facts.payer.payer.name or "the plan"
    turn.speak("rep", f"Thank you for calling {payer}, this is {turn.line.rep.name}. {_ask_missing(turn)}")


def _missing(rep: dict[str, Any]) -> list[str]:
    wanted = (
        ("provider_name", "your name"),
        ("npi", "your NPI"),
        ("member_id", "the member ID"),
        ("birth_date", "the member's date of birth"),
    )
    return [label for key, label in wanted if not rep.get(key)]


def _ask_missing(turn: Turn) -> str:
    missing = _missing(_rep(turn))
    if not missing:
        return "How can I help you today?"
    listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
    return f"To verify, may I have {listed}?"


def respond(turn: Turn, text: str, *, keyed: str | None = None) -> None:
    """The representative's answer to one thing the agent said (or keyed)."""
    rep = _rep(turn)
    if keyed is not None:
        turn.speak("rep", "I'm sorry, I can't take key presses. Please tell me what you need.")
        return
    lowered = text.lower()
    if rep.get("misheard") and not rep.get("verified"):
        _correction(turn, text)
        return
    _take_identity(turn, text)
    intents = [name for name, words in _INTENTS if any(word in lowered for word in words)]
    wants_reference = "reference" in lowered or "confirmation number" in lowered
    closing = any(phrase in lowered for phrase in _CLOSING)
    if not rep.get("verified"):
        if _mishear(turn):
            return
        outcome = _verify(turn)
        if outcome is not None:  # the details given do not match: say so, disclose nothing
            turn.speak("rep", outcome)
            return
    if not rep.get("verified"):
        if intents and set(intents) & _DISCLOSING:
            turn.speak("rep", "refused: the caller is not verified", "refused")
            turn.speak(
                "rep", f"I can't discuss the member's information until I verify you. {_ask_missing(turn)}"
            )
        elif closing:
            _close(turn)
        else:
            turn.speak("rep", _ask_missing(turn))
        return
    if intents and _difficulty(turn, intents):
        return
    answers = [_answer(turn, intent, text) for intent in intents]
    if wants_reference or closing:
        if answers:
            turn.speak("rep", " ".join(answers))
        _close(turn, goodbye=closing)
        return
    if answers:
        turn.speak("rep", " ".join(answers) + " Is there anything else?")
    elif rep.get("just_verified"):
        turn.speak("rep", "Thank you, you're verified. How can I help you today?")
    elif "thank" in lowered:
        turn.speak("rep", "You're welcome. Is there anything else I can help with?")
    else:
        turn.speak(
            "rep",
            "I'm sorry, I can't help with that on this call. You can send that request by fax to "
            f"{turn.line.rep.fax_number}. Is there anything else?",
        )
    rep["just_verified"] = False


def _take_identity(turn: Turn, text: str) -> None:
    """The NPI, name, member ID and date of birth the caller gave, wherever in the sentence."""
    rep = _rep(turn)
    found = _NAME.search(text)
    if found and not rep.get("provider_name"):
        rep["provider_name"] = found.group(1).strip()
    when, rest = read_date(text)
    if when is not None:
        rep["birth_date"] = when.isoformat()
    for run in digit_runs(rest):
        if len(run) == 10 and npi_valid(run):
            rep["npi"] = run
    member = _member_token(turn, rest)
    if member is not None:
        rep["member_id"] = member


def _member_token(turn: Turn, text: str) -> str | None:
    known = turn.facts.payer.members_by_id
    for token in re.findall(r"[A-Za-z0-9-]{2,}", text):
        if token.casefold() in known:
            return token.upper()
    for run in digit_runs(text):  # a member ID read out digit by digit
        if run.casefold() in known:
            return run
    said = re.search(r"member (?:id|number)(?: is)?\s+([A-Za-z0-9][A-Za-z0-9 -]{1,30})", text, re.IGNORECASE)
    if said:
        return re.sub(r"[\s-]", "", said.group(1)).upper()[:20]
    return None


def _mishear(turn: Turn) -> bool:
    """`mishear_digit`: the member ID is read back with its last digit off by one, once."""
    rep = _rep(turn)
    member_id = rep.get("member_id")
    if "mishear_digit" not in turn.line.rep.behaviours or not member_id or rep.get("misheard_done"):
        return False
    digits = [i for i, c in enumerate(member_id) if c.isdigit()]
    if not digits:
        return False
    at = digits[-1]
    wrong = member_id[:at] + str((int(member_id[at]) + 1) % 10) + member_id[at + 1 :]
    rep.update(misheard=wrong, misheard_done=True, member_id=wrong)
    turn.speak("rep", f"Let me read that back: member ID {spell_digits(wrong)}. Is that right?")
    return True


def _correction(turn: Turn, text: str) -> None:
    rep = _rep(turn)
    wrong = rep.pop("misheard")
    if says_no(text):
        member = _member_token(turn, text)
        if member is not None and member != wrong:
            rep["member_id"] = member
            turn.speak("rep", f"Thank you, member ID {spell_digits(member)}.")
        else:
            rep["member_id"] = None
            turn.speak("rep", "I'm sorry. Could you give me the member ID again?")
            return
    outcome = _verify(turn)
    if outcome is not None:
        turn.speak("rep", outcome)
    elif rep.get("verified"):
        turn.speak("rep", "You're verified. How can I help you today?")
        rep["just_verified"] = False
    else:
        turn.speak("rep", _ask_missing(turn))


def _verify(turn: Turn) -> str | None:
    """Verify once all four are given; a sentence when they do not match the payer's records."""
    rep = _rep(turn)
    if _missing(rep):
        return None
    npi = str(rep["npi"])
    providers = turn.line.rep.providers
    if providers and not any(
        p.get("npi") == npi and _same_name(p.get("name", ""), str(rep["provider_name"])) for p in providers
    ):
        rep["npi"] = rep["provider_name"] = None
        return (
            "I'm sorry, I can't find that provider name and NPI together. Could you repeat your name and NPI?"
        )
    match = find_member(turn.facts.payer, str(rep["member_id"]), birth_date=str(rep["birth_date"]))
    if match.member is None:
        rep["member_id"] = rep["birth_date"] = None
        return "I'm sorry, that member ID and date of birth don't match our records. Could you repeat them?"
    rep.update(verified=True, just_verified=True, member_key=match.member.member_id)
    turn.speak(
        "rep",
        f"verified: provider {rep['provider_name']} NPI {npi}, member {match.member.member_id}",
        "verified",
    )
    return None


def _same_name(recorded: str, given: str) -> bool:
    def words(name: str) -> list[str]:
        return [w for w in re.findall(r"[a-z]+", name.lower()) if w not in ("dr", "doctor")]

    return bool(words(recorded)) and words(recorded)[-1:] == words(given)[-1:]


def _difficulty(turn: Turn, intents: list[str]) -> bool:
    """The author's switches that get in the way of the first answer (each once a call)."""
    rep, behaviours = _rep(turn), turn.line.rep.behaviours
    if "insist_fax" in behaviours and "prior_auth" in intents:
        turn.speak(
            "rep",
            "Prior authorization questions have to come in by fax. Please fax the request to "
            f"{turn.line.rep.fax_number}. Is there anything else?",
        )
        return True
    for behaviour in ("ask_to_repeat", "transfer", "hold"):
        if behaviour not in behaviours or rep.get(f"{behaviour}_done"):
            continue
        rep[f"{behaviour}_done"] = True
        if behaviour == "ask_to_repeat":
            turn.speak("rep", "I'm sorry, you broke up there. Could you repeat the question?")
            return True
        if behaviour == "transfer":
            turn.speak("rep", "That's handled by our benefits department. Let me transfer you.")
            turn.speak("rep", "benefits", "transfer")
            turn.hold("rep", turn.line.rep.hold_ms, ["Please continue to hold."])
            turn.speak("rep", "Benefits department, I have your verification. Could you repeat the question?")
            return True
        turn.speak("rep", "Please hold while I look that up.")
        turn.hold("rep", turn.line.rep.hold_ms, ["Please continue to hold."])
        turn.speak("rep", "Thank you for holding.")
    return False


def _close(turn: Turn, *, goodbye: bool = True) -> None:
    from assay.sandboxes.voice.line.call import reference_number

    rep = _rep(turn)
    number = reference_number(str(turn.state["call_id"]))
    if not rep.get("reference_given"):
        turn.speak("rep", number, "reference")
        rep["reference_given"] = True
    if goodbye:
        turn.speak(
            "rep",
            f"Your call reference number is {spell_digits(number)}, that is {number}. Thank you for calling, goodbye.",
        )
        turn.end("the representative ended the call")
    else:
        turn.speak(
            "rep",
            f"Your call reference number is {spell_digits(number)}, that is {number}. Is there anything else?",
        )


def _member(turn: Turn) -> Member:
    match = find_member(
        turn.facts.payer, str(_rep(turn)["member_key"]), birth_date=str(_rep(turn)["birth_date"])
    )
    assert match.member is not None  # verified against the same definition
    return match.member


def _benefit(member: Member, text: str, attribute: str) -> tuple[Benefit | None, str]:
    lowered = text.lower()
    wanted = next((code for words, code in _SERVICE_WORDS if words in lowered), None)
    explicit = re.search(r"service type (?:code )?([a-z0-9]{1,3})\b", lowered)
    if explicit:
        wanted = explicit.group(1).upper()
    candidates = [b for b in member.benefits if getattr(b, attribute) is not None]
    if wanted is not None:
        chosen = next((b for b in candidates if b.service_type == wanted), None)
        return chosen, f"service type {wanted}"
    chosen = next((b for b in candidates if b.service_type == "30"), candidates[0] if candidates else None)
    return chosen, f"service type {chosen.service_type}" if chosen else "that service"


def _money(value: Decimal) -> str:
    return f"${value:,.2f}"


def _answer(turn: Turn, intent: str, text: str) -> str:
    member = _member(turn)
    if intent == "eligibility":
        coverage = member.coverage
        active = "active" if coverage.covers(turn.today()) else "not active"
        dates = []
        if coverage.start:
            dates.append(f"effective {coverage.start.isoformat()}")
        if coverage.end:
            dates.append(f"through {coverage.end.isoformat()}")
        plan = f" under plan {member.plan}" if member.plan else ""
        return f"The member's coverage is {active}{plan}" + (", " + " ".join(dates) if dates else "") + "."
    if intent == "copay":
        benefit, label = _benefit(member, text, "copay")
        if benefit is None or benefit.copay is None:
            return f"There is no copay on file for {label}."
        return f"The copay for {label} is {_money(benefit.copay)}."
    if intent == "deductible":
        benefit, label = _benefit(member, text, "deductible")
        if benefit is None or benefit.deductible is None:
            return f"There is no deductible on file for {label}."
        remaining = benefit.deductible_remaining
        if remaining is None:
            return f"The deductible for {label} is {_money(benefit.deductible)}."
        met = benefit.deductible - remaining
        return (
            f"The deductible for {label} is {_money(benefit.deductible)}; {_money(met)} has been met "
            f"and {_money(remaining)} remains."
        )
    if intent == "coinsurance":
        benefit, label = _benefit(member, text, "coinsurance")
        if benefit is None or benefit.coinsurance is None:
            return f"There is no coinsurance on file for {label}."
        percent = (benefit.coinsurance * 100).normalize()
        return f"Coinsurance for {label} is {percent:f} percent."
    if intent == "network":
        benefit, label = _benefit(member, text, "in_network")
        if benefit is None or benefit.in_network is None:
            return f"I don't have a network status on file for {label}."
        return f"For {label} the provider is {'in network' if benefit.in_network else 'out of network'}."
    if intent == "prior_auth":
        return _prior_auth(turn, member, text)
    return _claim(turn, member, text)


def _prior_auth(turn: Turn, member: Member, text: str) -> str:
    upper = text.upper()
    number = _AUTH.search(upper)
    procedure = _PROCEDURE.search(upper.replace("AUTH", " "))
    for row in turn.facts.prior_auths:
        found = row.get("patient")
        patient: dict[str, Any] = found if isinstance(found, dict) else {}
        if not identifiers_equal(str(patient.get("member_id") or ""), member.member_id):
            continue
        if number and not identifiers_equal(str(row.get("auth_number") or ""), number.group(0)):
            continue
        if (
            not number
            and procedure
            and not identifiers_equal(str(row.get("procedure_code") or ""), procedure.group(0))
        ):
            continue
        if not number and not procedure:
            continue
        status = str(row.get("status") or "submitted").replace("_", " ")
        said = f"The authorization for procedure {row.get('procedure_code')} is {status}"
        if row.get("auth_number"):
            said += f", authorization number {row['auth_number']}"
        if row.get("reason"):
            said += f", reason: {row['reason']}"
        return said + "."
    if number:
        return f"I don't see authorization {number.group(0)} on file for this member."
    if procedure:
        return f"I don't see an authorization on file for procedure {procedure.group(0)} for this member."
    return "Which procedure code or authorization number is this about?"


def _claim(turn: Turn, member: Member, text: str) -> str:
    payer = turn.facts.payer
    claims: list[Claim] = []
    for token in re.findall(r"[A-Za-z0-9-]{3,}", text):
        claims = [
            c
            for c in payer.claims_by_control_number.get(token.casefold(), ())
            if identifiers_equal(c.member_id, member.member_id)
        ]
        if claims:
            break
    if not claims:
        mine = [c for c in payer.claims if identifiers_equal(c.member_id, member.member_id)]
        if len(mine) != 1:
            return (
                "Which claim is this about? Please give me the patient control number."
                if mine
                else "I don't see any claims on file for this member."
            )
        claims = mine
    claim = claims[0]
    status = _STATUS.get(claim.status_category, f"in status {claim.status_category}")
    said = f"Claim {claim.patient_control_number} is {status}"
    if claim.paid is not None:
        said += f"; {_money(claim.paid)} was paid"
        if claim.paid_date:
            said += f" on {claim.paid_date.isoformat()}"
    if claim.check_number:
        said += f", check number {claim.check_number}"
    return said + "."
