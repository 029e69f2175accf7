"""The authorization rules engine (docs/sandboxes.md): one decision for a 278 and a portal submission.

Rules are tried in definition order and the first that matches wins; a rule matches when every
selector it has (`procedure_code`, `member_id`) equals the request's, compared after trimming and
case-folding. No match → `default_determination`. Pure: no clock, no store — the caller keeps
the result. An approval carries a certification number (the 278's HCR02, the portal's
`auth_number`) from `new_certification_number` unless the caller supplies its own generator.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from assay.sandboxes.payer.definition import AuthorizationRule, PayerDefinition
from assay.sandboxes.payer.members import identifiers_equal

__all__ = ["HCR_ACTIONS", "Determination", "decide_authorization", "new_certification_number"]

HCR_ACTIONS = {"approved": "A1", "denied": "A3", "pended": "A4", "more_info_needed": "CT"}
"""HCR01 action code per determination (X217 2000E/2000F HCR: certified in total, not certified,
pended, contact payer)."""

_ALPHABET = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
"""Digits and upper-case letters without I and O, which read as 1 and 0 on a phone call."""


def new_certification_number() -> str:
    """`AUTH` and 10 random characters: unique enough per playground, readable over the phone."""
    return "AUTH" + "".join(secrets.choice(_ALPHABET) for _ in range(10))


@dataclass(frozen=True, slots=True)
class Determination:
    """What the payer decided, why, and (when approved) the certification number."""

    determination: str
    """`approved`, `denied`, `pended` or `more_info_needed`."""
    reason: str | None = None
    auth_number: str | None = None
    rule: int | None = None
    """Index of the matching rule in `authorization_rules`; None for the default."""

    @property
    def action_code(self) -> str:
        """HCR01 of the 278 response."""
        return HCR_ACTIONS[self.determination]


def decide_authorization(
    payer: PayerDefinition,
    *,
    procedure_code: str | None,
    member_id: str | None,
    number: Callable[[], str] = new_certification_number,
) -> Determination:
    """Decide one request by the payer's rules (first match wins), else the default determination."""
    for index, rule in enumerate(payer.authorization_rules):
        if _matches(rule, procedure_code, member_id):
            return _determination(rule.determination, rule.reason, index, number)
    default = payer.default_determination
    return _determination(default.determination, default.reason, None, number)


def _matches(rule: AuthorizationRule, procedure_code: str | None, member_id: str | None) -> bool:
    if rule.procedure_code is not None and not identifiers_equal(rule.procedure_code, procedure_code):
        return False
    return rule.member_id is None or identifiers_equal(rule.member_id, member_id)


def _determination(
    kind: str, reason: str | None, rule: int | None, number: Callable[[], str]
) -> Determination:
    return Determination(kind, reason, number() if kind == "approved" else None, rule)
