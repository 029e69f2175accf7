"""`no-unexpected-changes` (issue 14): every change the agent made on a surface is allowed.

Changes are keys (`Patient/p1`, a file path) whose digest differs between the seeded baseline and
the final state: created, updated (content other than `meta`), deleted. Each change is matched
against `allow`; the criterion passes when none is left over, and the evidence lists every change
with whether it was allowed. A surface asked for without a recorded baseline (an older snapshot,
an external FHIR server) is `error`: the check cannot tell what the agent changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from fractions import Fraction
from typing import Any

from assay.checks._context import CheckContext
from assay.core.assertions import AllowPath, AllowResource, NoUnexpectedChanges
from assay.core.results import CriterionResult
from assay.core.state import BaselineState, SandboxState
from assay.formats.fhir import InvalidSearch, UnknownSearchParameter

__all__ = ["SURFACES", "check"]

SURFACES = ("fhir", "files")


def check(assertion: NoUnexpectedChanges, state: SandboxState, context: CheckContext) -> CriterionResult:
    """Judge the agent's changes on each surface; `error` when a baseline is missing."""
    if not isinstance(state, BaselineState):
        return CriterionResult.error("this state records no seeded baseline; changes cannot be judged")
    asked = assertion.surfaces
    baselines = {name: state.baseline(name) for name in (asked or SURFACES)}
    missing = [name for name, found in baselines.items() if found is None]
    if asked is not None and missing:
        return CriterionResult.error(
            f"no seeded baseline recorded for {', '.join(missing)}; changes cannot be judged"
        )
    compared = {name: found for name, found in baselines.items() if found is not None}
    if not compared:
        return CriterionResult.error("no seeded baseline recorded for any surface; changes cannot be judged")
    changes: list[dict[str, Any]] = []
    for name, baseline in compared.items():
        changes.extend(_changes(name, baseline, state.digests(name)))
    matched: dict[tuple[str, int], set[str]] = {}
    for change in changes:
        allowed = _allowed_by(assertion, change, state, matched)
        if isinstance(allowed, CriterionResult):
            return allowed
        change["allowed"] = allowed
    unexpected = [change for change in changes if change["allowed"] is None]
    evidence = {"surfaces": sorted(compared), "changes": changes, "unexpected": unexpected}
    if unexpected:
        listed = ", ".join(f"{c['change']} {c['key']}" for c in unexpected[:10])
        more = f" and {len(unexpected) - 10} more" if len(unexpected) > 10 else ""
        return CriterionResult(
            Fraction(0), f"{len(unexpected)} unexpected change(s): {listed}{more}.", evidence
        )
    return CriterionResult(
        Fraction(1), f"{len(changes)} change(s) on {', '.join(sorted(compared))}, all allowed.", evidence
    )


def _changes(surface: str, baseline: Mapping[str, str], final: Mapping[str, str]) -> list[dict[str, Any]]:
    found = []
    for key in sorted(set(baseline) | set(final)):
        before, after = baseline.get(key), final.get(key)
        if before == after:
            continue
        kind = "created" if before is None else "deleted" if after is None else "updated"
        found.append({"surface": surface, "key": key, "change": kind})
    return found


def _allowed_by(
    assertion: NoUnexpectedChanges,
    change: dict[str, Any],
    state: SandboxState,
    matched: dict[tuple[str, int], set[str]],
) -> int | CriterionResult | None:
    """The index of the first allow entry covering `change`, None when none does."""
    for i, entry in enumerate(assertion.allow):
        if change["surface"] == "files" and isinstance(entry, AllowPath):
            if fnmatchcase(change["key"], entry.path.lstrip("/")):
                return i
        elif change["surface"] == "fhir" and isinstance(entry, AllowResource):
            kind, _, rid = change["key"].partition("/")
            if kind != entry.resource_type or entry.change not in (None, change["change"]):
                continue
            if entry.search is None:
                return i
            if change["change"] == "deleted":
                continue
            ids = matched.get(("fhir", i))
            if ids is None:
                try:
                    found = state.fhir_search(entry.resource_type, entry.search)
                except UnknownSearchParameter as exc:
                    return CriterionResult.unsupported(str(exc))
                except InvalidSearch as exc:
                    return CriterionResult.failed(f"Invalid search in allow.{i}: {exc}.")
                ids = matched[("fhir", i)] = {str(resource.get("id")) for resource in found}
            if rid in ids:
                return i
    return None
