"""The payer definition (docs/sandboxes.md): dataset type `x12`, also read by the portal's determinations.

One pydantic model, validated once when the dataset is created (and again when a playground is
seeded from a stored one), so the clearinghouse and the portal read typed values and never a
dict. `parse_payer` is the one way in; every problem is reported by its key path inside the
definition (`members.0.birth_date`), the shape a 422's `details` carries.

Required (docs/sandboxes.md): `payer.id`; per member `member_id`, `first_name`, `last_name`,
`birth_date`; per benefit `service_type`, `coverage`; per claim `patient_control_number`,
`member_id`, `status_category`. Everything else is optional and absent means "not reported".
Unknown keys are refused, as they are in assertions (docs/assertions.md), so a typo such as `copy` for
`copay` is a 422 instead of a benefit silently missing from every 271.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from functools import cached_property
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

__all__ = [
    "Authorization",
    "AuthorizationRule",
    "Benefit",
    "Claim",
    "CoveragePeriod",
    "Member",
    "Payer",
    "PayerDefinition",
    "PayerDefinitionInvalid",
    "parse_date",
    "parse_payer",
]

_CODE = re.compile(r"[A-Za-z0-9]{1,3}")
_X12_TEXT = re.compile(r"[^*~:^|\r\n]*")
"""Text that can travel in an X12 element without colliding with common delimiters."""


class PayerDefinitionInvalid(ValueError):
    """A payer definition that does not validate; `errors` maps key paths to messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        key, messages = next(iter(errors.items()))
        super().__init__(f"{key}: {messages[0]}" if key else messages[0])


def parse_date(value: Any) -> date:
    """A date from `YYYY-MM-DD`, X12's `YYYYMMDD` (D8) or a `date`; `ValueError` otherwise."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a date string YYYY-MM-DD")
    text = value.strip()
    try:
        if len(text) == 8 and text.isdigit():
            return datetime.strptime(text, "%Y%m%d").date()
        if len(text) == 10:
            return date.fromisoformat(text)
    except ValueError:
        pass
    raise ValueError(f"{value!r} is not a date (YYYY-MM-DD or YYYYMMDD)")


def _amount(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError("must be a number")
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"{value!r} must be a finite number >= 0")
    return number


def _percent(value: Decimal) -> Decimal:
    """Coinsurance as X12 sends it (EB08: 0.2 = 20%); 20 is read as 20% too (a choice: no rule covers it)."""
    if value > 100:
        raise ValueError("coinsurance is a fraction (0.2) or a percentage (20), at most 100")
    return value / 100 if value > 1 else value


def _text(value: str) -> str:
    text = value.strip()
    if not text:
        raise ValueError("must not be empty")
    if not _X12_TEXT.fullmatch(text):
        raise ValueError(f"{value!r} contains an X12 delimiter (* ~ : ^ |) or a line break")
    return text


def _code(value: str) -> str:
    text = value.strip().upper()
    if not _CODE.fullmatch(text):
        raise ValueError(f"{value!r} is not an X12 code (1-3 letters or digits)")
    return text


_GENDERS = {"m": "M", "male": "M", "f": "F", "female": "F", "u": "U", "unknown": "U"}


def _gender(value: Any) -> str:
    found = _GENDERS.get(value.strip().lower()) if isinstance(value, str) else None
    if found is None:
        raise ValueError(f"{value!r} is not a gender: M, F or U (or male, female, unknown)")
    return found


Date = Annotated[date, BeforeValidator(parse_date)]
Amount = Annotated[Decimal, BeforeValidator(_amount)]
Text = Annotated[str, AfterValidator(_text)]
Code = Annotated[str, AfterValidator(_code)]
Determination = Literal["approved", "denied", "pended", "more_info_needed"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Payer(_Model):
    id: Text
    """The payer's identifier: the 271/277/278 source (NM1*PR) and the response's ISA sender."""
    name: Text | None = None
    id_qualifier: Code = "PI"
    """NM108 of the payer name (`PI` payor identification, `XV` CMS plan id, …)."""


class CoveragePeriod(_Model):
    start: Date | None = None
    end: Date | None = None

    def covers(self, day: date) -> bool:
        return (self.start is None or self.start <= day) and (self.end is None or day <= self.end)


class Benefit(_Model):
    service_type: Code
    """EB03 service type code: `30` plan coverage, `98` professional visit, `UC` urgent care, …"""
    coverage: Literal["active", "inactive", "not_covered"]
    in_network: bool | None = None
    copay: Amount | None = None
    coinsurance: Annotated[Amount, AfterValidator(_percent)] | None = None
    deductible: Amount | None = None
    deductible_remaining: Amount | None = None
    out_of_pocket: Amount | None = None
    out_of_pocket_remaining: Amount | None = None
    auth_required: bool | None = None
    visit_limit: Annotated[int, Field(ge=0)] | None = None
    message: Text | None = None


class Member(_Model):
    member_id: Text
    first_name: Text
    last_name: Text
    birth_date: Date
    gender: Annotated[str, BeforeValidator(_gender)] | None = None
    relationship: Literal["subscriber", "dependent"] = "subscriber"
    subscriber_id: Text | None = None
    """A dependent's subscriber (their `member_id`); None for a subscriber."""
    group_number: Text | None = None
    plan: Text | None = None
    coverage: CoveragePeriod = CoveragePeriod()
    benefits: tuple[Benefit, ...] = ()


class Claim(_Model):
    patient_control_number: Text
    member_id: Text
    status_category: Code
    """STC01-1, e.g. `F1` finalized/payment, `P1` pending, `A1` acknowledged."""
    status_code: Code | None = None
    """STC01-2, e.g. `65` claim has been paid."""
    provider_npi: Text | None = None
    service_date: Date | None = None
    charge: Amount | None = None
    paid: Amount | None = None
    paid_date: Date | None = None
    check_number: Text | None = None


class Authorization(_Model):
    determination: Determination
    reason: Text | None = None


class AuthorizationRule(Authorization):
    procedure_code: Text | None = None
    member_id: Text | None = None

    @model_validator(mode="after")
    def _selects_something(self) -> AuthorizationRule:
        if self.procedure_code is None and self.member_id is None:
            raise ValueError(
                "a rule needs procedure_code or member_id (default_determination covers the rest)"
            )
        return self


class PayerDefinition(_Model):
    payer: Payer
    members: tuple[Member, ...] = ()
    claims: tuple[Claim, ...] = ()
    authorization_rules: tuple[AuthorizationRule, ...] = ()
    default_determination: Authorization = Authorization(determination="pended")
    """When no rule matches; `pended` when the definition gives none (a choice: no rule covers it)."""
    duplicate_interchange: Literal["reject", "accept"] = "reject"
    """An interchange whose control number (ISA13) the run already sent: `reject` answers it
    with a TA1 note `025` and nothing inside it is read, as a clearinghouse does; `accept`
    answers it like any other."""

    @cached_property
    def members_by_id(self) -> Mapping[str, tuple[Member, ...]]:
        """Members by trimmed, case-folded id (a dependent may share its subscriber's), in order:
        a 270 of thousands of subscribers must not scan the member list for each."""
        found: dict[str, list[Member]] = {}
        for member in self.members:
            found.setdefault(member.member_id.casefold(), []).append(member)
        return MappingProxyType({key: tuple(value) for key, value in found.items()})

    @cached_property
    def dependents_by_subscriber(self) -> Mapping[str, tuple[Member, ...]]:
        """Dependents by their subscriber's case-folded id (`subscriber_id`, else their own id)."""
        found: dict[str, list[Member]] = {}
        for member in self.members:
            if member.relationship == "dependent":
                found.setdefault((member.subscriber_id or member.member_id).casefold(), []).append(member)
        return MappingProxyType({key: tuple(value) for key, value in found.items()})

    @cached_property
    def claims_by_control_number(self) -> Mapping[str, tuple[Claim, ...]]:
        found: dict[str, list[Claim]] = {}
        for claim in self.claims:
            found.setdefault(claim.patient_control_number.casefold(), []).append(claim)
        return MappingProxyType({key: tuple(value) for key, value in found.items()})

    @model_validator(mode="after")
    def _dependents_have_subscribers(self) -> PayerDefinition:
        subscribers = {m.member_id.casefold() for m in self.members if m.relationship == "subscriber"}
        for index, member in enumerate(self.members):
            if member.subscriber_id is not None and member.subscriber_id.casefold() not in subscribers:
                raise _KeyedError(
                    f"members.{index}.subscriber_id",
                    f"no subscriber has member_id {member.subscriber_id!r}",
                )
        return self


class _KeyedError(ValueError):
    """A cross-field problem raised by a model validator, with the key it belongs to."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


def parse_payer(data: Any) -> PayerDefinition:
    """Validate a payer definition; raise `PayerDefinitionInvalid` keyed by path.

    Raises:
        PayerDefinitionInvalid: `errors` like `{"members.0.birth_date": ["missing required key ..."]}`.
    """
    if isinstance(data, PayerDefinition):
        return data
    if not isinstance(data, dict):
        raise PayerDefinitionInvalid({"": ["a payer definition must be a JSON object"]})
    try:
        return PayerDefinition.model_validate(data)
    except ValidationError as exc:
        raise PayerDefinitionInvalid(_errors_by_key(exc)) from None


def _errors_by_key(exc: ValidationError) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        message = str(error["msg"]).removeprefix("Value error, ")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, _KeyedError):
            loc, message = cause.key.split("."), str(cause)
        elif error["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}"
        elif error["type"] == "missing":
            message = f"missing required key {loc[-1]!r}"
        errors.setdefault(".".join(loc), []).append(message)
    return errors
