"""`no-unexpected-changes`: every change the agent made on a surface is allowed.

Changes are keys whose digest differs between the seeded baseline and the final state: FHIR
`Patient/p1`, a file path, an outbound HL7 message (`outbound/1`, nothing outbound is seeded), a
portal row (`prior_auth_requests/0`, its place in insertion order) and an X12 exchange that writes
(`exchanges/2`, a 278 review request; 270/276 inquiries change nothing, and nothing is seeded) —
created, updated (FHIR: content other than `meta`) or deleted. Each change is matched against
`allow`, in order (an entry with `max` covers that many at most); the criterion passes when none is
left over, and the evidence lists every change with whether it was allowed.

What cannot be judged is `error`, never a silent pass: voice (a call writes no record) asked for
by name; a surface asked for without a recorded baseline (an older playground or snapshot, an
external FHIR server); and, with `surfaces` left out, any surface holding state with no baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from fractions import Fraction
from functools import cached_property
from typing import Any

from assay.checks._context import CheckContext
from assay.checks._x12 import member_ids, parsed_x12
from assay.core.assertions import (
    UNJUDGED_SURFACES,
    AllowExchange,
    AllowMessage,
    AllowPath,
    AllowResource,
    AllowRow,
    NoUnexpectedChanges,
)
from assay.core.operators import values_equal
from assay.core.results import CriterionResult
from assay.core.state import (
    BaselineState,
    Hl7Record,
    PortalRow,
    SandboxState,
    X12Record,
    hl7_key,
    portal_key,
    x12_key,
)
from assay.core.surfaces import surface_names
from assay.core.values import read_dotted
from assay.formats.fhir import InvalidSearch, UnknownSearchParameter
from assay.formats.hl7 import Hl7Message, Hl7ParseError, Hl7Path, Hl7PathError, parse_messages
from assay.formats.x12 import X12TransactionSet

__all__ = ["check", "compared_surfaces"]


def compared_surfaces() -> list[str]:
    """The surfaces compared when a criterion names none: every surface but those the check does
    not compare (`UNJUDGED_SURFACES`)."""
    return sorted(surface_names() - UNJUDGED_SURFACES.keys())


_HL7_ALIASES = {
    "message_type": lambda message: message.message_type.value,
    "trigger_event": lambda message: message.trigger_event.value,
    "control_id": lambda message: message.control_id.value,
}


class _Unjudgeable(Exception):
    """An allow entry that cannot be evaluated: the criterion's result instead of a verdict."""

    def __init__(self, result: CriterionResult):
        self.result = result


def check(assertion: NoUnexpectedChanges, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge the agent's changes on each surface; `error` when a baseline is missing."""
    asked = assertion.surfaces
    for unjudged in asked or ():
        if unjudged in UNJUDGED_SURFACES:
            return CriterionResult.error(
                f"{unjudged} is not compared by this check: {UNJUDGED_SURFACES[unjudged]}"
            )
    if not isinstance(state, BaselineState):
        return CriterionResult.error("this state records no seeded baseline; changes cannot be judged")
    baselines = {name: state.baseline(name) for name in (asked or compared_surfaces())}
    missing = [name for name, found in baselines.items() if found is None]
    if asked is None:  # every surface: one holding state with no baseline is an older playground
        missing = [name for name in missing if state.digests(name)]
    if missing:
        return CriterionResult.error(
            f"no seeded baseline recorded for {', '.join(missing)} (a playground or snapshot made "
            "before baselines were recorded, or state copied from an external server); changes "
            "cannot be judged"
        )
    compared = {name: found for name, found in baselines.items() if found is not None}
    if not compared:
        return CriterionResult.error("no seeded baseline recorded for any surface; changes cannot be judged")
    final = _Final(state)
    changes: list[dict[str, Any]] = []
    for name, baseline in compared.items():
        changes.extend(_changes(name, baseline, state.digests(name), final))
    used = [0] * len(assertion.allow)
    try:
        for change in changes:
            change["allowed"] = _allowed_by(assertion, change, final, used)
    except _Unjudgeable as exc:
        return exc.result
    unexpected = [change for change in changes if change["allowed"] is None]
    evidence = {"surfaces": sorted(compared), "changes": changes, "unexpected": unexpected}
    if unexpected:
        listed = ", ".join(f"{c['change']} {_named(c)}" for c in unexpected[:10])
        more = f" and {len(unexpected) - 10} more" if len(unexpected) > 10 else ""
        return CriterionResult(
            Fraction(0), f"{len(unexpected)} unexpected change(s): {listed}{more}.", evidence
        )
    return CriterionResult(
        Fraction(1), f"{len(changes)} change(s) on {', '.join(sorted(compared))}, all allowed.", evidence
    )


def _named(change: Mapping[str, Any]) -> str:
    """How `details` names a change: `Patient/bob`, `HL7 ADT^A08 outbound/2`, `portal patients/0`."""
    if change["surface"] == "hl7":
        return f"HL7 {change.get('message_type') or 'message'} {change['key']}"
    if change["surface"] == "x12":
        return f"X12 {change.get('transaction_set') or 'exchange'} {change['key']}"
    if change["surface"] in ("portal", "files"):
        return f"{change['surface']} {change['key']}"
    return str(change["key"])


class _Final:
    """The final state's HL7 messages and portal rows by change key, read once per check."""

    def __init__(self, state: SandboxState):
        self.state = state
        self.fhir_matches: dict[int, set[str]] = {}

    @cached_property
    def messages(self) -> dict[str, tuple[Hl7Record, tuple[Hl7Message, ...]]]:
        found = {}
        for i, record in enumerate(self.state.hl7_outbound(), 1):
            try:
                parsed = tuple(parse_messages(record.message))
            except Hl7ParseError:
                parsed = ()
            found[hl7_key(i)] = (record, parsed)
        return found

    @cached_property
    def exchanges(self) -> dict[str, tuple[X12Record, tuple[X12TransactionSet, ...]]]:
        """Each exchange's request parsed into its transaction sets (none when it does not parse)."""
        found = {}
        for i, record in enumerate(self.state.x12_records(), 1):
            document = parsed_x12(record.request).document if record.request else None
            found[x12_key(i)] = (record, tuple(document.transactions()) if document else ())
        return found

    def row(self, key: str) -> PortalRow | None:
        *slug, resource, _ = key.split("/")
        portal = slug[0] if slug else None
        for row in self.state.portal_rows(resource, portal):
            if row.portal == portal and portal_key(row) == key:
                return row
        return None


def _changes(
    surface: str, baseline: Mapping[str, str], final: Mapping[str, str], state: _Final
) -> list[dict[str, Any]]:
    found = []
    for key in sorted(set(baseline) | set(final), key=lambda k: _order(surface, k)):
        before, after = baseline.get(key), final.get(key)
        if before == after:
            continue
        kind = "created" if before is None else "deleted" if after is None else "updated"
        change: dict[str, Any] = {"surface": surface, "key": key, "change": kind}
        if surface == "hl7":
            _record, messages = state.messages.get(key, (None, ()))
            change["message_type"] = ",".join(str(m.message_type.value) for m in messages) or None
            change["control_id"] = messages[0].control_id.value if messages else None
        elif surface == "portal":
            *slug, resource, _ = key.split("/")
            change["resource"], change["portal"] = resource, slug[0] if slug else None
        elif surface == "x12":
            record, transactions = state.exchanges.get(key, (None, ()))
            change["transaction_set"] = ",".join(t.code for t in transactions) or None
            change["member_ids"] = sorted({m for t in transactions for m in member_ids(t)})
            change["record_id"] = record.record_id if record else None
        found.append(change)
    return found


def _order(surface: str, key: str) -> tuple[Any, ...]:
    """Keys in a reader's order: HL7 messages and portal rows by number, the rest by text."""
    head, _, tail = key.rpartition("/")
    if surface in ("hl7", "portal", "x12") and tail.isdigit():
        return (head, int(tail))
    return (key, 0)


def _allowed_by(
    assertion: NoUnexpectedChanges, change: dict[str, Any], final: _Final, used: list[int]
) -> int | None:
    """The index of the first allow entry covering `change` (and not yet full), None when none does."""
    for i, entry in enumerate(assertion.allow):
        if entry.max is not None and used[i] >= entry.max:
            continue
        if _covers(i, entry, change, final):
            used[i] += 1
            return i
    return None


def _covers(i: int, entry: Any, change: dict[str, Any], final: _Final) -> bool:
    surface = change["surface"]
    if isinstance(entry, AllowPath):
        return (
            surface == "files"
            and entry.change in (None, change["change"])
            and fnmatchcase(change["key"], entry.path.lstrip("/"))
        )
    if isinstance(entry, AllowResource):
        return surface == "fhir" and _covers_resource(i, entry, change, final)
    if isinstance(entry, AllowMessage):
        return surface == "hl7" and _covers_message(entry, change, final)
    if isinstance(entry, AllowRow):
        return surface == "portal" and _covers_row(entry, change, final)
    if isinstance(entry, AllowExchange):
        return surface == "x12" and _covers_exchange(entry, change, final)
    return False


def _covers_exchange(entry: AllowExchange, change: dict[str, Any], final: _Final) -> bool:
    """Every transaction set of the request is `transaction_set`, and with `member_id` every
    subscriber it names is that member (a request naming none is not about that member)."""
    _record, transactions = final.exchanges.get(change["key"], (None, ()))
    if not transactions or any(t.code != entry.transaction_set for t in transactions):
        return False
    if entry.member_id is None:
        return True
    members = [m for t in transactions for m in member_ids(t)]
    return bool(members) and all(values_equal(m, entry.member_id) for m in members)


def _covers_resource(i: int, entry: AllowResource, change: dict[str, Any], final: _Final) -> bool:
    kind, _, rid = change["key"].partition("/")
    if kind != entry.resource_type or entry.change not in (None, change["change"]):
        return False
    if entry.search is None:
        return True
    if change["change"] == "deleted":
        return False
    ids = final.fhir_matches.get(i)
    if ids is None:
        try:
            found = final.state.fhir_search(entry.resource_type, entry.search)
        except UnknownSearchParameter as exc:
            raise _Unjudgeable(CriterionResult.unsupported(str(exc))) from None
        except InvalidSearch as exc:
            raise _Unjudgeable(CriterionResult.failed(f"Invalid search in allow.{i}: {exc}.")) from None
        ids = final.fhir_matches[i] = {str(resource.get("id")) for resource in found}
    return rid in ids


def _covers_message(entry: AllowMessage, change: dict[str, Any], final: _Final) -> bool:
    """Every message of the record (one, or each of a batch) has the type and the `where` values."""
    _record, messages = final.messages.get(change["key"], (None, ()))
    return bool(messages) and all(_message_fits(entry, message) for message in messages)


def _message_fits(entry: AllowMessage, message: Hl7Message) -> bool:
    kind = str(message.message_type.value or "")
    if kind != entry.message_type and kind.split("^")[0] != entry.message_type:
        return False
    for key, expected in entry.where.items():
        alias = _HL7_ALIASES.get(key)
        try:
            found = alias(message) if alias else message.read(Hl7Path.parse(key)).value
        except Hl7PathError:
            return False
        if not values_equal(found, expected):
            return False
    return True


def _covers_row(entry: AllowRow, change: dict[str, Any], final: _Final) -> bool:
    if change["resource"] != entry.resource or entry.portal not in (None, change["portal"]):
        return False
    if entry.change not in (None, change["change"]):
        return False
    if not entry.where:
        return True
    row = final.row(change["key"])  # a deleted row is gone: only an entry without `where` covers it
    if row is None:
        return False
    for path, expected in entry.where.items():
        reading = read_dotted(row.row, path)
        if not reading.found:
            return False
        if not (
            values_equal(reading.actual, expected) or any(values_equal(v, expected) for v in reading.values)
        ):
            return False
    return True
