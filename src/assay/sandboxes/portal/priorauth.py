"""A `prior_auth_requests` submission (docs/sandboxes.md): checked, then decided at once by the payer.

The determination comes from `assay.sandboxes.payer.decide_authorization`, the engine the X12 278
uses, so the portal and the clearinghouse can never disagree on one request. The fields the payer
sets (`status`, `reason`, `auth_number`, `submitted_at`, `updated_at`) are refused in a
submission, except `status: "submitted"`: an agent must not be able to write its own approval.
Without a payer definition for the portal a submission stays `submitted`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import Any

from assay.sandboxes.payer import PayerDefinition, decide_authorization, find_member
from assay.store import Invalid, iso, utcnow

__all__ = ["PAYER_FIELDS", "REQUIRED", "amend", "check_submission", "submit"]

REQUIRED = ("patient.member_id", "provider.npi", "procedure_code")
"""What a payer needs to decide (the 278's subscriber, requester and service)."""
PAYER_FIELDS = ("status", "reason", "auth_number", "submitted_at", "updated_at")
_DECIDING = frozenset({"patient", "procedure_code"})
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MEMBER_FIELDS = {"75": "patient.member_id", "73": "patient.name", "58": "patient.birth_date"}


def check_submission(row: Mapping[str, Any], payer: PayerDefinition | None) -> dict[str, list[str]]:
    """Problems by dotted field path (every one at once, for the web form's inline errors)."""
    errors: dict[str, list[str]] = {}
    for part in ("patient", "provider"):
        if part in row and not isinstance(row[part], dict):
            errors[part] = ["must be an object"]
    for path in REQUIRED:
        outer, _, inner = path.partition(".")
        value = row.get(outer)
        if inner and isinstance(value, dict):
            value = value.get(inner)
        elif inner:
            value = None
        if path not in errors and outer not in errors and (not isinstance(value, str) or not value.strip()):
            errors[path] = ["required" if value in (None, "") else "must be a string"]
    codes = row.get("diagnosis_codes")
    if codes is not None and not (isinstance(codes, list) and all(isinstance(c, str) and c for c in codes)):
        errors["diagnosis_codes"] = ["must be an array of codes"]
    service_date = row.get("service_date")
    if service_date is not None and not _is_date(service_date):
        errors["service_date"] = ["must be a date YYYY-MM-DD"]
    patient = row.get("patient")
    birth = patient.get("birth_date") if isinstance(patient, dict) else None
    if birth not in (None, "") and not _is_date(birth):
        errors["patient.birth_date"] = ["must be a date YYYY-MM-DD"]
    if payer is not None and "patient.member_id" not in errors and "patient" not in errors:
        errors.update(_member_problem(payer, row["patient"]))
    return errors


def _is_date(value: Any) -> bool:
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _member_problem(payer: PayerDefinition, patient: Mapping[str, Any]) -> dict[str, list[str]]:
    birth = patient.get("birth_date") or None
    match = find_member(payer, patient.get("member_id"), birth_date=birth if _is_date(birth) else None)
    if match.member is not None:
        return {}
    field = _MEMBER_FIELDS.get(match.reject or "", "patient.birth_date")
    return {field: [match.reason or "does not match the payer's member"]}


def submit(row: dict[str, Any], payer: PayerDefinition | None) -> dict[str, Any]:
    """The stored row of a new submission: checked, completed from the member, decided."""
    forged = [
        f for f in PAYER_FIELDS if row.get(f) is not None and not (f == "status" and row[f] == "submitted")
    ]
    errors = {f: ["set by the payer when it decides the request"] for f in forged}
    errors.update(check_submission(row, payer))
    if errors:
        raise Invalid(errors, f"prior authorization request is incomplete or invalid: {', '.join(errors)}")
    now = iso(utcnow())
    stored = {
        **row,
        "patient": _completed(payer, dict(row["patient"])),
        "submitted_at": now,
        "updated_at": now,
    }
    return {**stored, **_decision(payer, stored)}


def amend(
    old: Mapping[str, Any], changes: Mapping[str, Any], payer: PayerDefinition | None
) -> dict[str, Any]:
    """A PATCH of a request: payer fields refused; a changed patient or procedure is decided again."""
    forged = [f for f in PAYER_FIELDS if f in changes]
    if forged:
        raise Invalid({f: ["set by the payer when it decides the request"] for f in forged})
    row = {**old, **changes, "updated_at": iso(utcnow())}
    if not _DECIDING.intersection(changes):
        return row
    errors = check_submission(row, payer)
    if errors:
        raise Invalid(errors)
    row["patient"] = _completed(payer, dict(row["patient"]))
    return {**row, **_decision(payer, row)}


def _completed(payer: PayerDefinition | None, patient: dict[str, Any]) -> dict[str, Any]:
    """`name` and `birth_date` filled from the payer's member record when the request left them out."""
    match = find_member(payer, patient.get("member_id")) if payer is not None else None
    member = match.member if match is not None else None
    if member is not None:
        patient.setdefault("name", f"{member.first_name} {member.last_name}")
        patient.setdefault("birth_date", member.birth_date.isoformat())
    return patient


def _decision(payer: PayerDefinition | None, row: Mapping[str, Any]) -> dict[str, Any]:
    if payer is None:
        return {"status": "submitted", "reason": None, "auth_number": None}
    decided = decide_authorization(
        payer, procedure_code=row.get("procedure_code"), member_id=row["patient"].get("member_id")
    )
    return {"status": decided.determination, "reason": decided.reason, "auth_number": decided.auth_number}
