"""FHIR R4 operations and compartments: `GET [Compartment]/[id]/[type]`,
`Patient/[id]/$everything`, `Observation/$lastn`, `[type]/$validate`.

- **Compartment search** (search.html §3.1.1.1.1): `[Compartment]/[id]/[type]`, the type's
  search restricted to resources that one of the compartment's parameters
  (`formats/fhir/compartments.py`, R4's five CompartmentDefinitions) points at the owner with.
- **$everything** (patient-operation-everything.html): the patient, every resource in its
  compartment, and the resources those refer to (practitioners, organizations, locations,
  medications…), as HAPI returns them; `start`/`end` keep the compartment resources whose care
  date (`compartments.PATIENT_CARE_DATES`) overlaps the range, or that have none, and what those
  refer to; `_since` keeps resources written at or after it; `_type` (0..*, comma lists) the listed
  types; `_count` and `_offset` page (`next` links). The patient is always in, bar `_type`.
- **$lastn** (observation-operation-lastn.html): the Observation search given, grouped by code, the
  `max` (default 1) most recent per group by effective time (then `issued`).
- **$validate** (resource-operation-validate.html): the body (a resource, or a Parameters with a
  `resource` part) checked as a write would be; always 200 with an OperationOutcome (HAPI's
  answer), whose issues are the errors or one `information` issue saying it is valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from assay.formats.fhir.compartments import COMPARTMENTS, PATIENT_CARE_DATES, PATIENT_COMPARTMENT
from assay.formats.fhir.dates import NEG_INF, POS_INF, date_range
from assay.formats.fhir.parameters import is_resource_type, resource_types
from assay.sandboxes.fhir.history import Paging, to_instant
from assay.sandboxes.fhir.outcomes import FhirError, operation_outcome
from assay.sandboxes.fhir.resources import check_resource, check_type
from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.searching import (
    DEFAULT_COUNT,
    entries_bundle,
    nonnegative,
    run_search,
    search,
)
from assay.sandboxes.fhir.store import EmbeddedFhir
from assay.sandboxes.fhir.validation import validation_issues

__all__ = ["OPERATIONS", "compartment_search", "everything", "lastn", "validate"]

OPERATIONS: dict[str, tuple[frozenset[str], str, str]] = {
    "everything": (
        frozenset({"Patient"}),
        "instance",
        "http://hl7.org/fhir/OperationDefinition/Patient-everything",
    ),
    "lastn": (
        frozenset({"Observation"}),
        "type",
        "http://hl7.org/fhir/OperationDefinition/Observation-lastn",
    ),
    "validate": (resource_types(), "type", "http://hl7.org/fhir/OperationDefinition/Resource-validate"),
}
"""Operation → (resource types, level, OperationDefinition): what `routes.py` serves and the
CapabilityStatement lists (`capability.py`)."""


def _owner(index: Any, kind: str, owner_id: str) -> dict[str, Any]:
    current = index.current((kind, owner_id))
    if current is None:
        raise FhirError(404, f"{kind}/{owner_id} is not known")
    if current.resource is None:
        raise FhirError(410, f"{kind}/{owner_id} was deleted")
    resource: dict[str, Any] = current.resource
    return resource


def compartment_search(
    fhir: EmbeddedFhir,
    store_id: str,
    base: str,
    compartment: str,
    owner_id: str,
    resource_type: str,
    pairs: Sequence[tuple[str, str]],
) -> FhirResult:
    """`GET [Compartment]/[id]/[type]?…`: the type's search within that compartment (any of R4's
    five: Patient, Encounter, RelatedPerson, Practitioner, Device)."""
    check_type(compartment)
    check_type(resource_type)
    members = COMPARTMENTS.get(compartment)
    if members is None:
        raise FhirError(
            400,
            f"{compartment} is not an R4 compartment (those are {', '.join(COMPARTMENTS)})",
            "not-supported",
        )
    codes = members.get(resource_type)
    if codes is None:
        raise FhirError(
            400,
            f"{resource_type} is never in a {compartment} compartment "
            f"(R4 compartmentdefinition-{compartment.lower()})",
        )
    with fhir.reading(store_id) as index:
        _owner(index, compartment, owner_id)
    return search(
        fhir, store_id, base, resource_type, pairs,
        compartment=(f"{compartment}/{owner_id}", codes),
        path=f"{base}/{compartment}/{owner_id}/{resource_type}",
    )  # fmt: skip


_EVERYTHING_PARAMETERS = frozenset(
    {"start", "end", "_count", "_offset", "_getpagesoffset", "_type", "_since", "_format", "_pretty"}
)


@dataclass(frozen=True)
class _Everything:
    """The parsed parameters of one `$everything` request."""

    count: int = DEFAULT_COUNT
    offset: int = 0
    since: datetime | None = None
    types: frozenset[str] | None = None
    care: tuple[int, int] | None = None
    """`[start, end]` as `[low, high)` microseconds (`start`'s first instant, `end`'s last): care
    that overlaps it is in."""


def _everything_parameters(pairs: Sequence[tuple[str, str]]) -> _Everything:
    paging = Paging()
    types: set[str] | None = None
    care = [NEG_INF, POS_INF]
    seen: set[str] = set()
    for name, value in pairs:
        if name not in _EVERYTHING_PARAMETERS:
            raise FhirError(
                400, f"$everything takes start, end, _since, _type, _count and _offset, not {name!r}"
            )
        if name in seen and name != "_type":  # _type is 0..*, the others 0..1
            raise FhirError(400, f"$everything takes {name} at most once")
        seen.add(name)
        taken = paging.taking(name, value)
        if taken is not None:
            paging = taken
        elif name == "_type":
            listed = {t.strip() for t in value.split(",") if t.strip()}
            for kind in listed:
                if not is_resource_type(kind):
                    raise FhirError(400, f"$everything _type: {kind!r} is not an R4 resource type")
            types = (types or set()) | listed
        elif name in ("start", "end"):
            moment = date_range(value)
            if moment is None:
                raise FhirError(400, f"$everything {name} must be a FHIR date, got {value!r}")
            care[name == "end"] = moment.low if name == "start" else moment.high
    return _Everything(
        paging.count, paging.offset, paging.since, frozenset(types) if types is not None else None,
        (care[0], care[1]) if {"start", "end"} & seen else None,
    )  # fmt: skip


def _members(
    store: Any, kind: str, local: str, codes: Sequence[str], care: tuple[int, int] | None
) -> list[Any]:
    """The resources of `kind` in the compartment; with `care`, those whose care date
    (`PATIENT_CARE_DATES`) overlaps it, and those without one."""
    members = store.search(kind, {}, compartment=(local, codes))
    code = PATIENT_CARE_DATES.get(kind)
    if care is None or code is None:
        return list(members)
    low, high = care
    return [
        r for r in members
        if not (ranges := store.dates(kind, code, r["id"])) or any(d.low < high and d.high > low for d in ranges)
    ]  # fmt: skip


def everything(
    fhir: EmbeddedFhir, store_id: str, base: str, patient_id: str, pairs: Sequence[tuple[str, str]]
) -> FhirResult:
    """`Patient/[id]/$everything`: the patient, its compartment and what they refer to, paged;
    `start`/`end` keep the compartment's resources whose care falls in the range (the patient
    is always in), `_since` those written since, `_type` the listed types."""
    asked = _everything_parameters(pairs)
    with fhir.reading(store_id) as index:
        patient = _owner(index, "Patient", patient_id)
        store = index.search_index
        local = f"Patient/{patient_id}"
        found: dict[tuple[str, str], dict[str, Any]] = {("Patient", patient_id): patient}
        for kind, codes in PATIENT_COMPARTMENT.items():
            if store.has_type(kind):
                for resource in _members(store, kind, local, codes, asked.care):
                    found.setdefault((kind, resource["id"]), resource)
        for target in store.outgoing(list(found)):
            kind, _, rid = target.partition("/")
            if (kind, rid) not in found:
                current = index.current((kind, rid))
                if current is not None and current.resource is not None:
                    found[(kind, rid)] = current.resource
    resources = [
        r
        for (kind, rid), r in found.items()
        if (asked.types is None or kind in asked.types)
        and ((kind, rid) == ("Patient", patient_id) or _since(r, asked.since))
    ]
    page = resources[asked.offset : asked.offset + asked.count]
    return FhirResult(
        200,
        entries_bundle(
            f"{base}/Patient/{patient_id}/$everything", pairs, base, page, len(resources),
            asked.count, asked.offset,
        ),
    )  # fmt: skip


def _since(resource: dict[str, Any], since: datetime | None) -> bool:
    if since is None:
        return True
    stamp = (resource.get("meta") or {}).get("lastUpdated")
    try:
        return isinstance(stamp, str) and to_instant("lastUpdated", stamp) >= since
    except FhirError:
        return False


def _code_key(observation: dict[str, Any]) -> str:
    code = observation.get("code") or {}
    for coding in code.get("coding") or []:
        if isinstance(coding, dict) and coding.get("code"):
            return f"{coding.get('system', '')}|{coding['code']}"
    return f"text:{code.get('text', '')}"


def _effective(observation: dict[str, Any]) -> str:
    period = observation.get("effectivePeriod") or {}
    for value in (
        observation.get("effectiveDateTime"), observation.get("effectiveInstant"),
        period.get("end"), period.get("start"), observation.get("issued"),
    ):  # fmt: skip
        if isinstance(value, str):
            return value
    return ""


def lastn(fhir: EmbeddedFhir, store_id: str, base: str, pairs: Sequence[tuple[str, str]]) -> FhirResult:
    """`Observation/$lastn?max=n&…`: the n most recent Observations per code among the matches."""
    most = 1
    criteria: list[tuple[str, str]] = []
    for name, value in pairs:
        if name == "max":
            most = nonnegative(name, value) or 1
        elif name not in ("_format", "_pretty"):
            criteria.append((name, value))
    params: dict[str, list[str]] = {}
    for name, value in criteria:
        params.setdefault(name, []).append(value)
    with fhir.reading(store_id) as index:
        matches = run_search(index.search_index.search, "Observation", params)
    groups: dict[str, list[dict[str, Any]]] = {}
    for observation in matches:
        groups.setdefault(_code_key(observation), []).append(observation)
    chosen = [o for group in groups.values() for o in sorted(group, key=_effective, reverse=True)[:most]]
    return FhirResult(
        200,
        entries_bundle(f"{base}/Observation/$lastn", pairs, base, chosen, len(chosen), len(chosen) or 1, 0),
    )


def validate(resource_type: str, body: Any) -> FhirResult:
    """`POST [type]/$validate`: the body checked as a write would be, as an OperationOutcome."""
    check_type(resource_type)
    if isinstance(body, dict) and body.get("resourceType") == "Parameters" and resource_type != "Parameters":
        parts = [
            p for p in body.get("parameter") or [] if isinstance(p, dict) and p.get("name") == "resource"
        ]
        if len(parts) != 1 or not isinstance(parts[0].get("resource"), dict):
            raise FhirError(400, "$validate takes a resource, or Parameters with one 'resource' part")
        body = parts[0]["resource"]
    resource = check_resource(body, resource_type)
    issues = validation_issues(resource)
    if not issues:
        return FhirResult(
            200, operation_outcome(f"{resource_type} is valid R4", "informational", "information")
        )
    return FhirResult(200, {"resourceType": "OperationOutcome", "issue": issues})
