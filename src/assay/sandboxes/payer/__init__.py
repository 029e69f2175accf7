"""The simulated payer (docs/sandboxes.md): its definition, member matching and authorization rules.

Pure values and functions — no SQL, no HTTP — shared by the X12 clearinghouse (271/277/278) and
the payer portal (`prior_auth_requests` determinations), so both answer from one implementation.
"""

from assay.sandboxes.payer.authorization import (
    HCR_ACTIONS,
    Determination,
    decide_authorization,
    new_certification_number,
)
from assay.sandboxes.payer.definition import (
    Authorization,
    AuthorizationRule,
    Benefit,
    Claim,
    CoveragePeriod,
    Member,
    Payer,
    PayerDefinition,
    PayerDefinitionInvalid,
    parse_date,
    parse_payer,
)
from assay.sandboxes.payer.members import (
    MemberMatch,
    dependents_of,
    find_member,
    identifiers_equal,
    match_dependent,
    names_equal,
)

__all__ = [
    "HCR_ACTIONS",
    "Authorization",
    "AuthorizationRule",
    "Benefit",
    "Claim",
    "CoveragePeriod",
    "Determination",
    "Member",
    "MemberMatch",
    "Payer",
    "PayerDefinition",
    "PayerDefinitionInvalid",
    "decide_authorization",
    "dependents_of",
    "find_member",
    "identifiers_equal",
    "match_dependent",
    "names_equal",
    "new_certification_number",
    "parse_date",
    "parse_payer",
]
